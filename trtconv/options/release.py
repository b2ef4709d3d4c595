"""`trtconv release`'s options, and the batch sizes a release benches at."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# A release benches (and gates) at these batch sizes unless its [bench] table says otherwise.
DEFAULT_RELEASE_BATCH_SIZES = (1, 8)


@dataclass(frozen=True)
class ReleaseOptions:
    """`trtconv release`: the TOML config, where the release directory goes (None: the
    config's own or release-out/NAME), and whether to resume or replace one."""

    config: Path
    output: Path | None = None
    resume: bool = False
    force: bool = False
