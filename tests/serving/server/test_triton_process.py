"""The files a Triton server started by trtconv leaves on the machine: its workspace and its
Python backend's shared-memory regions, removed when it stops, and by the next start when it
was killed outright."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

from trtconv.serving.server.triton_process import (
    LOCK_FILE,
    SHM_DIR,
    WORKSPACE_PREFIX,
    locked_workspace,
    shm_prefix,
    sweep_leftovers,
)


@pytest.mark.skipif(not SHM_DIR.is_dir(), reason=f"needs {SHM_DIR} (Linux)")
def test_a_start_removes_what_killed_servers_left_and_spares_a_running_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = tmp_path / f"{WORKSPACE_PREFIX}killed"  # its lock file, held by nobody now
    (killed / "models").mkdir(parents=True)
    (killed / LOCK_FILE).touch()
    foreign = tmp_path / f"{WORKSPACE_PREFIX}foreign"  # no lock file: not one of these servers'
    foreign.mkdir()
    regions = [SHM_DIR / f"{shm_prefix(killed)}region"]
    regions[0].write_bytes(bytes(16))
    try:
        with locked_workspace() as running:  # a start: it sweeps first
            assert running.parent == tmp_path and running.name.startswith(WORKSPACE_PREFIX)
            assert not killed.exists() and not regions[0].exists()
            assert foreign.is_dir()
            regions.append(SHM_DIR / f"{shm_prefix(running)}region")
            regions[1].write_bytes(bytes(16))
            sweep_leftovers()  # another start, while this server runs
            assert running.is_dir() and regions[1].exists()  # its lock is held
        assert not running.exists() and not regions[1].exists()  # a stop removes its own
    finally:
        for region in regions:
            with contextlib.suppress(FileNotFoundError):
                region.unlink()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a folder to another user")
def test_a_start_leaves_another_users_workspace_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    others = tmp_path / f"{WORKSPACE_PREFIX}others"  # a killed server's, of another user
    others.mkdir()
    (others / LOCK_FILE).touch()
    os.chown(others, 65534, 65534)
    sweep_leftovers()
    assert others.is_dir()
    os.chown(others, os.getuid(), os.getgid())
    sweep_leftovers()
    assert not others.exists()
