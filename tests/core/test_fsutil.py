"""Atomic outputs: nothing half-written survives a failure, nothing is replaced without force."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trtconv.core.errors import UsageError
from trtconv.core.fsutil import PARTIAL_PREFIX, atomic_directory, check_output_free, sha256_path


def test_atomic_directory_renames_into_place(tmp_path: Path) -> None:
    output = tmp_path / "artifact"
    with atomic_directory(output) as staging:
        (staging / "payload.bin").write_bytes(b"abc")
        assert not output.exists()
    assert (output / "payload.bin").read_bytes() == b"abc"
    assert not any(p.name.startswith(PARTIAL_PREFIX) for p in tmp_path.iterdir())


def test_atomic_directory_leaves_nothing_on_failure(tmp_path: Path) -> None:
    output = tmp_path / "artifact"
    with pytest.raises(RuntimeError), atomic_directory(output) as staging:
        (staging / "half.bin").write_bytes(b"x")
        raise RuntimeError("converter crashed")
    assert list(tmp_path.iterdir()) == []


def test_atomic_directory_cleans_up_on_interrupt(tmp_path: Path) -> None:
    output = tmp_path / "artifact"
    with pytest.raises(KeyboardInterrupt), atomic_directory(output):
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_existing_output_is_refused_and_kept(tmp_path: Path) -> None:
    output = tmp_path / "artifact"
    output.mkdir()
    (output / "keep.txt").write_text("old")
    with pytest.raises(UsageError, match="--force"), atomic_directory(output):
        pass
    assert (output / "keep.txt").read_text() == "old"


def test_force_replaces_existing_output(tmp_path: Path) -> None:
    output = tmp_path / "artifact"
    output.mkdir()
    (output / "old.txt").write_text("old")
    with atomic_directory(output, force=True) as staging:
        (staging / "new.txt").write_text("new")
    assert sorted(p.name for p in output.iterdir()) == ["new.txt"]


def test_failed_forced_run_keeps_the_old_output(tmp_path: Path) -> None:
    output = tmp_path / "artifact"
    output.mkdir()
    (output / "old.txt").write_text("old")
    with pytest.raises(ValueError), atomic_directory(output, force=True):
        raise ValueError("boom")
    assert (output / "old.txt").read_text() == "old"


def test_sha256_of_directory_depends_on_names_and_contents(tmp_path: Path) -> None:
    first = tmp_path / "a"
    first.mkdir()
    (first / "x.bin").write_bytes(b"1")
    digest = sha256_path(first)
    assert digest == sha256_path(first)
    (first / "x.bin").write_bytes(b"2")
    assert sha256_path(first) != digest
    (first / "x.bin").rename(first / "y.bin")
    assert sha256_path(first) != digest


def test_atomic_output_is_readable_by_others(tmp_path: Path) -> None:
    import os

    output = tmp_path / "artifact"
    with atomic_directory(output):
        pass
    umask = os.umask(0)
    os.umask(umask)
    assert output.stat().st_mode & 0o777 == 0o777 & ~umask


def test_write_atomic_replaces_whole_files_with_the_umask_mode(tmp_path: Path) -> None:
    from trtconv.core.fsutil import current_umask, write_atomic

    path = tmp_path / "sub" / "release.json"
    write_atomic(path, "old")
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert path.stat().st_mode & 0o777 == 0o666 & ~current_umask()
    assert [p.name for p in path.parent.iterdir()] == ["release.json"]


def test_write_atomic_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    from trtconv.core.fsutil import write_atomic

    path = tmp_path / "release.md"
    write_atomic(path, "old")
    with pytest.raises(TypeError):
        write_atomic(path, None)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["release.md"]


def test_output_under_a_file_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    with pytest.raises(UsageError, match=r"notes\.txt is a file, not a folder\.$"):
        check_output_free(blocker / "deeper" / "artifact", force=False)


def test_output_in_a_folder_nobody_may_write_is_refused(tmp_path: Path) -> None:
    # Root may write in a 0500 folder, but not under /sys (sysfs): refused for everyone.
    target = Path("/sys/trtconv-out") if os.geteuid() == 0 else tmp_path / "locked" / "out"
    if os.geteuid() == 0 and not Path("/sys").is_dir():
        pytest.skip("running as root on a machine without /sys")
    if os.geteuid() != 0:
        target.parent.mkdir()
        target.parent.chmod(0o500)
    with pytest.raises(UsageError, match=r"cannot be written: .*\.$"):
        check_output_free(target, force=False)
    assert not target.exists()


def test_writable_output_leaves_no_probe_behind(tmp_path: Path) -> None:
    check_output_free(tmp_path / "a" / "b" / "artifact", force=False)
    assert list(tmp_path.iterdir()) == []
