"""`trtconv deploy`'s options."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trtconv.core.errors import UsageError
from trtconv.options.serving import DEFAULT_LATENCY_BUDGET_MS, check_admission
from trtconv.options.shared import check_positive


@dataclass(frozen=True)
class DeployOptions:
    """`trtconv deploy`: one Triton model per model in `models` (artifacts or SavedModels),
    written to the repository `output`. `bench` is a `trtconv bench --json` result whose rows
    for each model tune its batching; `threads` None leaves the backend's default."""

    models: tuple[Path, ...]
    output: Path
    force: bool = False
    bench: Path | None = None
    instances: int = 1
    threads: int | None = None
    # A `bench --scenario server --json` result: the batching its rows met the budget with.
    serving: Path | None = None
    # Admission control: the queue timeout and size derive from the budget and a measured rate
    # (--bench, --serving) unless given.
    latency_budget_ms: float = DEFAULT_LATENCY_BUDGET_MS
    max_queue_size: int | None = None
    queue_timeout_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(Path(m) for m in self.models))
        object.__setattr__(self, "output", Path(self.output))
        if not self.models:
            raise UsageError("Give at least one artifact or SavedModel to deploy.")
        check_positive("--instances", self.instances)
        if self.threads is not None:
            check_positive("--threads", self.threads)
        check_admission(self.latency_budget_ms, self.max_queue_size, self.queue_timeout_ms)
