"""tests/helpers/model_cache.py's `built_once`: a fixture model is built once for every
pytest-xdist worker and every later run, also when called with keywords."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import model_cache


@pytest.fixture
def fresh_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty models directory for this test (the run's own is left alone)."""
    monkeypatch.setenv(model_cache.ROOT_VARIABLE, str(tmp_path))
    model_cache.shared_dir.cache_clear()
    yield tmp_path
    model_cache.shared_dir.cache_clear()


def test_a_build_runs_once_and_later_processes_read_its_record(fresh_root: Path) -> None:
    calls: list[tuple[int, str]] = []

    def model(size: int, kind: str = "plain") -> Path:
        calls.append((size, kind))
        path = model_cache.shared_dir() / f"model-{size}-{kind}"
        path.write_text("weights")
        return path

    once = model_cache.built_once(model)
    first = once(3, kind="wide")
    assert once(3, kind="wide") == first and first.read_text() == "weights"
    once.cache_clear()  # what another worker, or the next run, starts with
    assert once(3, kind="wide") == first
    assert calls == [(3, "wide")]
    assert once(3) != first and calls == [(3, "wide"), (3, "plain")]
    assert first.parent.parent == fresh_root
