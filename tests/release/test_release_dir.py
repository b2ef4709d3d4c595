"""The release directory: when it may be reused or replaced, its lock, and leftover sweeping."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtconv.core.errors import UsageError
from trtconv.release.rundir import check_release_dir, clean_release_dir, exclusive
from trtconv.release.steps import data_fingerprint


def make_release_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "out"
    (directory / ".state" / "steps").mkdir(parents=True)
    (directory / ".state" / "steps" / "bench.json").write_text("{}")
    (directory / "artifacts" / "ort-int8").mkdir(parents=True)
    (directory / "release.json").write_text("{}")
    return directory


def test_new_or_empty_directory_is_fine(tmp_path: Path) -> None:
    check_release_dir(tmp_path / "new", resume=False, force=False)
    check_release_dir(tmp_path, resume=False, force=False)  # empty


def test_existing_release_needs_resume_or_force(tmp_path: Path) -> None:
    directory = make_release_dir(tmp_path)
    with pytest.raises(UsageError, match="already exists; pass --resume"):
        check_release_dir(directory, resume=False, force=False)
    check_release_dir(directory, resume=True, force=False)
    check_release_dir(directory, resume=False, force=True)
    with pytest.raises(UsageError, match="--resume or --force, not both"):
        check_release_dir(directory, resume=True, force=True)


def test_force_never_empties_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(UsageError, match="not a release directory"):
        check_release_dir(tmp_path, resume=False, force=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        check_release_dir(tmp_path / "file", resume=True, force=False)


def test_force_empties_but_keeps_the_lock(tmp_path: Path) -> None:
    directory = make_release_dir(tmp_path)
    with exclusive(directory):
        clean_release_dir(directory, force=True)
        assert [p.name for p in directory.rglob("*")] == [".state", "lock"]


def test_resume_sweeps_staging_leftovers_only(tmp_path: Path) -> None:
    directory = make_release_dir(tmp_path)
    (directory / "artifacts" / ".partial-ort-fp32-x1").mkdir()
    (directory / ".partial-release.md").write_text("half")
    clean_release_dir(directory, force=False)
    assert sorted(p.name for p in (directory / "artifacts").iterdir()) == ["ort-int8"]
    assert not (directory / ".partial-release.md").exists()
    assert (directory / ".state" / "steps" / "bench.json").exists()


def test_second_run_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    refused = pytest.raises(UsageError, match="Another release is running")
    with exclusive(tmp_path), refused, exclusive(tmp_path):
        pass
    with exclusive(tmp_path):  # released when the first run ends
        pass


def test_data_fingerprint_follows_content(tmp_path: Path) -> None:
    data = tmp_path / "calib.npz"
    data.write_bytes(b"one")
    first = data_fingerprint(str(data))
    data.write_bytes(b"two")
    assert data_fingerprint(str(data)) != first
    assert data_fingerprint(None) is None
    digits = data_fingerprint("digits")
    assert digits is not None and digits["source"] == "digits" and digits["scikit-learn"]
