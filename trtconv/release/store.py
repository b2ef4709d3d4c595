"""Resume state: one record per finished step, written last and atomically.

A step's outputs are first written atomically (fsutil.atomic_directory); only then is its record
written, holding the hash of its inputs (source model, precision, backend, calibration data, tool
versions, the config that matters) and the sha256 of each output. `--resume` reuses a step only
when its record exists, its input key is the same and every output still has the recorded hash,
so an interrupted or tampered step is redone, never trusted.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trtconv.core.fsutil import PARTIAL_PREFIX, sha256_bytes, sha256_path, write_atomic

log = logging.getLogger(__name__)

STATE_DIR = ".state"
STORE_SCHEMA_VERSION = 1


def canonical_json(data: Any) -> str:
    """Key-sorted compact JSON: equal inputs always hash alike."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def step_key(inputs: dict[str, Any]) -> str:
    """The sha256 of a step's inputs."""
    return sha256_bytes(canonical_json(inputs).encode())


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as indented JSON, atomically (fsutil.write_atomic)."""
    write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def sweep_partials(directory: Path) -> list[Path]:
    """Remove staging leftovers (`.partial-*`) that only a SIGKILL can leave behind."""
    removed = []
    if directory.is_dir():
        for leftover in directory.glob(f"{PARTIAL_PREFIX}*"):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
            removed.append(leftover)
    return removed


@dataclass
class StepRecord:
    """A finished step: its inputs, its result, and the hash of each output it wrote."""

    step: str
    key: str
    inputs: dict[str, Any]
    result: dict[str, Any]
    outputs: dict[str, str]  # path relative to the release directory -> sha256
    seconds: float
    completed_at: str
    schema_version: int = STORE_SCHEMA_VERSION


class StepStore:
    """The step records of one release directory (kept under `.state/steps/`)."""

    def __init__(self, release_dir: Path) -> None:
        self.release_dir = Path(release_dir)
        self.steps_dir = self.release_dir / STATE_DIR / "steps"

    def _path(self, step: str) -> Path:
        return self.steps_dir / f"{step}.json"

    def _read(self, step: str) -> StepRecord | None:
        path = self._path(step)
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("schema_version") != STORE_SCHEMA_VERSION:
                return None
            return StepRecord(**data)
        except (json.JSONDecodeError, TypeError) as exc:
            # Records are written atomically, so this is tampering or a foreign file: redo.
            log.warning("ignoring unreadable step record %s (%s)", path, exc)
            return None

    def lookup(self, step: str, inputs: dict[str, Any]) -> tuple[StepRecord | None, str]:
        """The reusable record of `step` for these inputs, or None and why it cannot be reused."""
        record = self._read(step)
        if record is None:
            return None, "not run before"
        if record.key != step_key(inputs):
            changed = sorted(
                name
                for name in set(inputs) | set(record.inputs)
                if canonical_json(inputs.get(name)) != canonical_json(record.inputs.get(name))
            )
            return None, f"inputs changed ({', '.join(changed) or 'format'})"
        for relative, digest in record.outputs.items():
            output = self.release_dir / relative
            if not output.exists():
                return None, f"output {relative} is missing"
            if sha256_path(output) != digest:
                return None, f"output {relative} changed since it was written"
        return record, "inputs and outputs unchanged"

    def forget(self, step: str) -> None:
        """Drop a step's record before redoing it: a stale record must never outlive its outputs."""
        self._path(step).unlink(missing_ok=True)

    def record(
        self,
        step: str,
        inputs: dict[str, Any],
        result: dict[str, Any],
        outputs: list[Path],
        seconds: float,
    ) -> StepRecord:
        """Mark `step` done; call only after every output is complete and in place."""
        hashes = {
            Path(output).resolve().relative_to(self.release_dir.resolve()).as_posix(): sha256_path(
                output
            )
            for output in outputs
        }
        record = StepRecord(
            step=step,
            key=step_key(inputs),
            inputs=inputs,
            result=result,
            outputs=hashes,
            seconds=round(seconds, 3),
            completed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        write_json_atomic(self._path(step), asdict(record))
        return record

    def clear(self) -> None:
        """Forget every step (a fresh release into an existing directory)."""
        shutil.rmtree(self.steps_dir, ignore_errors=True)
