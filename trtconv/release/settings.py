"""The release config's settings: typed, frozen, one per TOML table ([model], [train],
[[targets]], [calibration], [eval], [preprocessing], [outputs], [bench], [gates], [serving],
[deploy]), and the whole
`ReleaseConfig`. `trtconv.release.config` reads them from TOML; `trtconv.release.command_options`
builds each command's options from them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trtconv.core.judging_options import RELEASE_CONFIG, Judging, ToleranceOptions
from trtconv.core.results import JsonResult
from trtconv.options.bench import DEFAULT_BENCH_ROUNDS, DEFAULT_SPEED_TIME_LIMIT_S
from trtconv.options.convert import (
    DEFAULT_CALIB_METHOD,
    DEFAULT_FALLBACK_TIME_LIMIT_S,
    ConvertOptions,
)
from trtconv.options.release import DEFAULT_RELEASE_BATCH_SIZES
from trtconv.options.server_bench import DEFAULT_LOAD_RUN_S, DEFAULT_SEARCH_RUNS
from trtconv.options.shared import PreprocessingOptions
from trtconv.options.train import TrainOptions


@dataclass(frozen=True)
class ModelSettings:
    """Exactly one of `path` (a SavedModel) and `zoo` (a model to train first); `signature`:
    the SavedModel's signature to release (as --signature; None: serving_default);
    `custom_objects`: MODULE:NAME classes a Keras file needs (as --custom-objects)."""

    path: Path | None = None
    zoo: str | None = None
    signature: str | None = None
    custom_objects: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrainSettings:
    """`trtconv train` options for a zoo model; None means the model's default."""

    data: str | None = None
    epochs: int | None = None
    batch_size: int | None = None
    amp: bool = TrainOptions.amp
    amp_dtype: str = TrainOptions.amp_dtype
    xla: bool = TrainOptions.xla
    seed: int = TrainOptions.seed


@dataclass(frozen=True)
class Target:
    """One conversion to try; `tolerance` and `rtol` bound every output (as --tolerance X,R);
    `roles`, `tolerances`, `rtols` and `min_within` (per output) refine [outputs]."""

    backend: str
    precision: str | None  # None: backend "best" over every precision
    tolerance: float | None = None
    roles: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, float] = field(default_factory=dict)
    min_within: dict[str, float] = field(default_factory=dict)
    rtol: float | None = None
    rtols: dict[str, float] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Stable name: the artifact folder under artifacts/ and the key in release.json."""
        return "-".join(part for part in (self.backend, self.precision) if part)


@dataclass(frozen=True)
class CalibrationSettings:
    """INT8 calibration, as `convert --calib-data/--calib-method/--calib-samples/--int8-target`,
    and the int8 precision ladder (`--no-fallback`, `--fallback-time-limit`). `samples` None:
    convert's default."""

    data: str | None = None
    method: str = DEFAULT_CALIB_METHOD
    samples: int | None = None
    int8_target: str = ConvertOptions.int8_target
    fallback: bool = ConvertOptions.fallback
    fallback_time_limit_s: float = DEFAULT_FALLBACK_TIME_LIMIT_S


@dataclass(frozen=True)
class EvalSettings:
    """Labelled evaluation data for accuracy and agreement; None: the convert validation.
    `samples` None: validate's default. `split`: held-out (default) or all, for [eval] and the
    bench's evaluation alike. `confidence`: the level accuracy verdicts are decided at
    (convert's validation and [eval]'s; 0: point decisions); None: the commands' default."""

    data: str | None = None
    samples: int | None = None
    split: str | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class PreprocessingSettings:
    """How raw pixels become inputs, as convert/validate/bench --image-scale/-offset/-mean/-std;
    None: the model card's, else 1/255. `input_values`: inputs the data does not hold, as
    --input-value (`input_values = {is_training = false}`)."""

    scale: float | None = None
    offset: float | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    input_values: dict[str, bool | int | float] | None = None

    def options(self) -> PreprocessingOptions:
        """As the commands take them."""
        return PreprocessingOptions(self.scale, self.offset, self.mean, self.std, self.input_values)


@dataclass(frozen=True)
class OutputSettings:
    """How outputs are judged, for every target: roles, per-output tolerances (absolute, and
    relative: `rtols`) and the share of samples that must lie within them, and whether an
    output nothing can judge may pass (as --output-role, --tolerance NAME=X,R:MIN,
    --allow-unjudged)."""

    roles: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, float] = field(default_factory=dict)
    allow_unjudged: bool = False
    labels_output: str | None = None  # the output the labels score (as --labels-output)
    min_within: dict[str, float] = field(default_factory=dict)
    rtols: dict[str, float] = field(default_factory=dict)

    def judging(self, target: Target | None = None) -> Judging:
        """The target's roles over these (all of them were checked when read)."""
        roles = {**self.roles, **(target.roles if target else {})}
        return Judging.build(
            roles,
            allow_unjudged=self.allow_unjudged,
            source=RELEASE_CONFIG,
            labels_output=self.labels_output,
        )

    def tolerance(self, target: Target | None = None) -> ToleranceOptions:
        """The target's tolerances over these: as --tolerance, stated by the release config."""
        return ToleranceOptions.build(
            {**self.tolerances, **(target.tolerances if target else {})},
            {**self.rtols, **(target.rtols if target else {})},
            {**self.min_within, **(target.min_within if target else {})},
            atol=target.tolerance if target else None,
            rtol=target.rtol if target else None,
            source=RELEASE_CONFIG,
        )


@dataclass(frozen=True)
class BenchSettings:
    """How each model is timed; `iterations` and `duration_s` exclude each other, `rounds` is
    how many interleaved rounds they are split into. None: the bench's own defaults."""

    batch_sizes: tuple[int, ...] = DEFAULT_RELEASE_BATCH_SIZES
    iterations: int | None = None
    duration_s: float | None = None
    warmup: int | None = None
    threads: int | None = None
    data: str | None = None
    rounds: int = DEFAULT_BENCH_ROUNDS


@dataclass(frozen=True)
class GateSettings:
    """Thresholds every target must meet; None: gate not applied. While a speed gate's interval
    straddles its threshold the bench adds rounds for up to `speed_time_limit_s` seconds."""

    max_accuracy_drop: float | None = None
    min_top1_agreement: float | None = None
    min_speedup: float | None = None
    max_latency_ms_p99: float | None = None
    gate_batch_size: int = max(DEFAULT_RELEASE_BATCH_SIZES)
    speed_time_limit_s: float = DEFAULT_SPEED_TIME_LIMIT_S
    # Queries/s each target's server takes with its p99 within [serving] latency_budget_ms.
    min_qps_at_budget: float | None = None


@dataclass(frozen=True)
class ServingSettings:
    """[serving]: serve native and every converted target (`bench --scenario server`) and find
    the highest queries/s whose p99 meets `latency_budget_ms`; None: no serving run."""

    latency_budget_ms: float | None = None
    duration_s: float = DEFAULT_LOAD_RUN_S
    search_runs: int = DEFAULT_SEARCH_RUNS


@dataclass(frozen=True)
class DeploySettings:
    """[deploy]: `triton` writes the recommended artifact's Triton model repository (batching
    from the serving run when the release ran one)."""

    triton: bool = False


@dataclass(frozen=True)
class ReleaseConfig(JsonResult):
    """A whole release config, checked; `source` is the TOML file it came from. Its JSON is the
    config echo of release.json (`from_json` reads an echo back as the config)."""

    source: Path
    model: ModelSettings
    targets: tuple[Target, ...]
    train: TrainSettings | None = None
    calibration: CalibrationSettings = field(default_factory=CalibrationSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    bench: BenchSettings = field(default_factory=BenchSettings)
    gates: GateSettings = field(default_factory=GateSettings)
    preprocessing: PreprocessingSettings = field(default_factory=PreprocessingSettings)
    outputs: OutputSettings = field(default_factory=OutputSettings)
    serving: ServingSettings = field(default_factory=ServingSettings)
    deploy: DeploySettings = field(default_factory=DeploySettings)

    def to_json(self) -> dict[str, Any]:
        """The config echo for release.json: JSON-ready, paths as strings, each target with
        its `id`."""
        data = asdict(self)
        data["source"] = str(self.source)
        path = None if self.model.path is None else str(self.model.path)
        # Keys added since release.json's first version are echoed only when set.
        later = {"custom_objects", "input_values"}
        model = {**asdict(self.model), "path": path}
        data["model"] = {k: v for k, v in model.items() if k not in later or v}
        data["preprocessing"] = {
            k: v for k, v in asdict(self.preprocessing).items() if k not in later or v
        }
        data["targets"] = [{**asdict(t), "id": t.id} for t in self.targets]
        data["bench"]["batch_sizes"] = list(self.bench.batch_sizes)
        return data
