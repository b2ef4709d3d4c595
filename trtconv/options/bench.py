"""`trtconv bench`'s options and their defaults: warm-up, timed budget and rounds, the
baseline, and the speed goal a release's gates keep a bench timing for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import Judging
from trtconv.options.shared import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_DEVICE,
    DEVICES,
    SPLITS,
    PreprocessingOptions,
    check_batch_sizes,
    check_choice,
    check_signature,
    shapes_of,
)

# bench: warm-up calls per batch size (without --warmup/--warmup-s), timed seconds per batch size
# (without --iterations/--duration).
DEFAULT_WARMUP_ITERATIONS = 10
DEFAULT_DURATION_S = 3.0
# bench: the rounds each batch size's timed budget is split into, the models interleaved round by
# round; the 95% intervals are bootstrapped over them (trtconv.measure.stats).
DEFAULT_BENCH_ROUNDS = 10
# bench: what the speedups are over. "source": the first SavedModel given, else the first
# artifact's source model (measured too); "first": the first model given, nothing added (an
# artifact against another where TensorFlow is not installed).
BASELINE_SOURCE, BASELINE_FIRST = "source", "first"
BASELINES = (BASELINE_SOURCE, BASELINE_FIRST)
# How long a bench with a speed goal (a release's min_speedup / max_latency_ms_p99 gates) may keep
# adding rounds while an interval straddles its threshold (release [gates] speed_time_limit_s).
DEFAULT_SPEED_TIME_LIMIT_S = 60.0


@dataclass(frozen=True)
class SpeedGoal:
    """Thresholds a bench keeps timing for: at `batch_size`, rounds are added while some model's
    speed-up interval straddles `min_speedup` or its p99 latency interval `max_latency_ms_p99`,
    for at most `time_limit_s` seconds (a release's speed gates)."""

    batch_size: int
    min_speedup: float | None = None
    max_latency_ms_p99: float | None = None
    time_limit_s: float = DEFAULT_SPEED_TIME_LIMIT_S

    def __post_init__(self) -> None:
        if self.time_limit_s < 0:
            raise UsageError(f"The speed time limit {self.time_limit_s:g} s is negative.")


@dataclass(frozen=True)
class BenchOptions:
    """`trtconv bench`: models side by side. None means the defaults: DEFAULT_WARMUP_ITERATIONS
    warm-up calls, DEFAULT_DURATION_S timed seconds, the library's threads, random data, the
    model card's preprocessing, the manifest's judging and split. Repeated batch sizes are
    measured once; a model with a fixed batch is measured at that batch when `batch_sizes` is
    the default. `signature`: the SavedModels' signature (None: serving_default, or the one the
    artifacts were converted from); `input_shapes` fill in dynamic dimensions of random data.
    The timed budget is split into `rounds` interleaved rounds; `goal` (None: no goal) adds
    rounds at its batch size until its thresholds are decided. `baseline`: one of BASELINES."""

    models: tuple[Path, ...]
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    warmup: int | None = None
    warmup_s: float | None = None
    iterations: int | None = None
    duration_s: float | None = None
    threads: int | None = None
    data: str | None = None
    eval_data: str | None = None
    xla: bool = False
    throughput: bool = False
    report: Path | None = None
    force: bool = False
    device: str = DEFAULT_DEVICE
    judging: Judging = field(default_factory=Judging)
    preprocessing: PreprocessingOptions = field(default_factory=PreprocessingOptions)
    split: str | None = None
    signature: str | None = None
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    rounds: int = DEFAULT_BENCH_ROUNDS
    goal: SpeedGoal | None = None
    baseline: str = BASELINE_SOURCE
    # --custom-objects MODULE:NAME: classes a Keras file needs (else an artifact's recorded ones).
    custom_objects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.baseline not in BASELINES:
            raise UsageError(
                f"--baseline {self.baseline} is unknown: choose {' or '.join(BASELINES)}."
            )
        object.__setattr__(self, "models", tuple(Path(m) for m in self.models))
        object.__setattr__(self, "input_shapes", shapes_of(self.input_shapes))
        check_signature(self.signature)
        object.__setattr__(self, "batch_sizes", tuple(dict.fromkeys(self.batch_sizes)))
        check_batch_sizes(self.batch_sizes)
        self._check_budgets()
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads {self.threads} is invalid: it must be at least 1.")
        check_choice("--device", self.device, DEVICES)
        if self.split is not None:
            check_choice("--split", self.split, SPLITS)
        if self.rounds < 1:
            raise UsageError(f"--rounds {self.rounds} is invalid: it must be at least 1.")
        if self.goal is not None and self.goal.batch_size not in self.batch_sizes:
            raise UsageError(
                f"The speed goal's batch size {self.goal.batch_size} is not benchmarked "
                f"(batch sizes {', '.join(map(str, self.batch_sizes))})."
            )

    def _check_budgets(self) -> None:
        """--warmup/--warmup-s and --iterations/--duration: each pair exclusive, none negative,
        the timed ones positive."""
        if self.warmup is not None and self.warmup_s is not None:
            raise UsageError("Give --warmup (iterations) or --warmup-s (seconds), not both.")
        if self.iterations is not None and self.duration_s is not None:
            raise UsageError("Give --iterations or --duration, not both.")
        for name, value, timed in (
            ("--warmup", self.warmup, False),
            ("--warmup-s", self.warmup_s, False),
            ("--iterations", self.iterations, True),
            ("--duration", self.duration_s, True),
        ):
            if value is not None and (value < 0 or (timed and not value)):
                raise UsageError(f"{name} {value} is invalid: it must be positive.")
