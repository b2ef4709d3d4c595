"""The release document, typed: targets, their gates, the recommendation and the evidence.

Built by pipeline.py, judged by verdict.py, and turned once by `ReleaseDocument.result` into
the `ReleaseResult` whose `to_json()` is release.json (schema: release.schema.json), the --json
output and what release.md renders. Derived fields (`passed`, `verdict`, `exit_code`,
`reused_steps`, `timings`) are computed from the recorded ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trtconv.artifact.manifest import Manifest
from trtconv.convert.convert_result import ConvertResult
from trtconv.convert.tournament import TournamentTable
from trtconv.core.errors import TrtconvError
from trtconv.core.results import JsonResult, to_jsonable
from trtconv.facts.environment import Environment
from trtconv.measure.bench_result import BenchResult, BenchRow
from trtconv.measure.server_bench_result import ServerBenchResult, ServerRow
from trtconv.outputs.confidence import FAILED, INCONCLUSIVE, PASSED
from trtconv.outputs.validation_result import ValidationReport
from trtconv.quantize.ladder_result import LadderRecord
from trtconv.release.gates import GateResult
from trtconv.release.settings import ReleaseConfig
from trtconv.validate.pipeline import ValidateResult

RELEASE_SCHEMA_VERSION = 1
EXIT_PASSED, EXIT_NO_TARGET = 0, 4
CONVERTED, FAILED_TO_CONVERT = "converted", "failed"


@dataclass(frozen=True)
class StepError:
    """Why a target failed to convert: the error's type, its message and its exit code."""

    type: str
    message: str
    exit_code: int

    @classmethod
    def of(cls, exc: TrtconvError) -> StepError:
        return cls(type(exc).__name__, str(exc), exc.exit_code)


@dataclass
class Conversion(JsonResult):
    """A convert step's record: convert's result (also when the artifact failed validation),
    or the error that stopped it. Its document is convert's with `status` first, or `status`
    and `error` (what --resume reads back)."""

    status: str  # "converted" or "failed"
    result: ConvertResult = field(default_factory=ConvertResult)
    error: StepError | None = None

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"status": self.status, "error": to_jsonable(self.error)}
        return {"status": self.status, **self.result.to_json()}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Conversion:
        error = document.get("error")
        if error is not None:
            return cls(document["status"], error=StepError(**error))
        result = {key: value for key, value in document.items() if key != "status"}
        return cls(document["status"], ConvertResult.from_json(result))


@dataclass(frozen=True)
class StepEntry:
    """One step of the run: reused or run, why, and its seconds (now, and when it ran)."""

    name: str
    reused: bool
    reason: str
    seconds: float
    recorded_seconds: float


@dataclass(frozen=True)
class SourceModel:
    """The SavedModel released: its path and sha256, whether the release trained it, and then
    the test accuracy its model card recorded."""

    path: str
    sha256: str
    trained: bool
    test_accuracy: float | None


@dataclass(frozen=True)
class Recommendation:
    """The artifact to release and the figures that chose it."""

    target: str
    artifact: str
    backend: str
    precision: str
    batch_size: int
    throughput_per_s: float | None
    speedup_vs_baseline: float | None
    latency_ms_p99: float | None
    reason: str


@dataclass
class TargetResult:
    """A target's entry in release.json; the blocks convert, validate and bench wrote (manifest,
    validation, ladder, tournament, eval, bench rows) are kept as they wrote them."""

    id: str
    requested_backend: str
    backend: str
    precision: str | None
    status: str  # "converted" or "failed"
    error: StepError | None  # when it failed
    artifact: str | None  # relative to the release directory
    artifact_sha256: str | None
    manifest: Manifest | None
    backend_reason: str | None
    conversion_seconds: float | None
    artifact_size_bytes: int | None
    validation: ValidationReport | None
    ladder: LadderRecord | None
    tournament: TournamentTable | None
    eval: ValidateResult | None
    bench: list[BenchRow]
    gates: list[GateResult]
    passed: bool
    serving: ServerRow | None = None  # its row of the serving run ([serving])


@dataclass
class ReleaseResult(JsonResult):
    """What `trtconv release` returns: `to_json()` is release.json (and its --json output)."""

    schema_version: int
    config: ReleaseConfig  # its JSON: the config echo
    config_sha256: str
    release_dir: str
    source_model: SourceModel
    targets: list[TargetResult]
    gate_batch_size: int
    bench: BenchResult
    plots: list[str]
    steps: list[StepEntry]
    reused_steps: list[str]
    timings: dict[str, float]  # seconds per step, and total_seconds
    environment: Environment
    created_at: str
    verdict: str  # "passed", "failed" or "inconclusive" (no target passed; one was undecided)
    exit_code: int
    recommendation: Recommendation | None
    recommendation_reason: str
    native_bench: list[BenchRow]
    serving: ServerBenchResult | None = None  # the serving run's result ([serving]), None: none
    triton_repository: str | None = None  # the recommended artifact's ([deploy] triton)


@dataclass
class TargetEntry:
    """One target while the release runs: its conversion step's result, evaluation, bench rows
    and gates."""

    id: str
    requested_backend: str
    requested_precision: str | None  # None: every precision (backend "best")
    conversion: Conversion  # the convert step's result: status, error or the artifact's figures
    artifact: str | None = None  # relative to the release directory
    artifact_sha256: str | None = None
    eval: ValidateResult | None = None
    bench: list[BenchRow] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    serving: ServerRow | None = None

    @property
    def converted(self) -> bool:
        """Whether the convert step wrote an artifact (it may still have failed validation)."""
        return self.conversion.status == CONVERTED

    @property
    def backend(self) -> str:
        """The backend that converted it (what `auto` chose), else the one requested."""
        return self.conversion.result.backend or self.requested_backend

    @property
    def ladder(self) -> LadderRecord | None:
        """The int8 precision ladder its conversion climbed (None: not int8, or turned off)."""
        return self.conversion.result.ladder

    @property
    def precision(self) -> str | None:
        """The precision it was converted at (what `best` chose), else the one requested."""
        return self.conversion.result.precision or self.requested_precision

    @property
    def passed(self) -> bool:
        """Converted, judged, and every gate passed."""
        return self.converted and bool(self.gates) and all(gate.passed for gate in self.gates)

    @property
    def inconclusive(self) -> bool:
        """Converted and judged, no gate failed, and some gate could not be decided (a speed
        gate whose interval straddles its threshold)."""
        verdicts = {gate.verdict for gate in self.gates}
        return self.converted and INCONCLUSIVE in verdicts and FAILED not in verdicts

    def result(self) -> TargetResult:
        """The target's entry in release.json."""
        converted = self.conversion.result
        return TargetResult(
            id=self.id,
            requested_backend=self.requested_backend,
            backend=self.backend,
            precision=self.precision,
            status=self.conversion.status,
            error=self.conversion.error,
            artifact=self.artifact,
            artifact_sha256=self.artifact_sha256,
            manifest=converted.manifest,
            backend_reason=converted.backend_reason,
            conversion_seconds=converted.conversion_seconds,
            artifact_size_bytes=converted.artifact_size_bytes,
            validation=converted.validation,
            ladder=self.ladder,
            tournament=converted.tournament,
            eval=self.eval,
            bench=self.bench,
            gates=list(self.gates),
            passed=self.passed,
            serving=self.serving,
        )


@dataclass
class ReleaseDocument:
    """A whole release while it is judged: config, source model, targets, bench, steps."""

    config: ReleaseConfig
    config_sha256: str
    release_dir: str
    source_model: SourceModel
    targets: list[TargetEntry]
    bench: BenchResult
    plots: list[str]
    steps: list[StepEntry]
    environment: Environment
    created_at: str
    native_bench: list[BenchRow] = field(default_factory=list)
    recommendation: Recommendation | None = None
    recommendation_reason: str = ""
    total_seconds: float = 0.0
    serving: ServerBenchResult | None = None
    triton_repository: str | None = None

    @property
    def exit_code(self) -> int:
        """0 with a recommendation, else 4 (no target passed every gate: failed or
        inconclusive)."""
        return EXIT_PASSED if self.recommendation is not None else EXIT_NO_TARGET

    @property
    def verdict(self) -> str:
        """ "passed" with a recommendation; else "inconclusive" when some target failed no gate
        but could not be decided on a speed gate, else "failed"."""
        if self.recommendation is not None:
            return PASSED
        undecided = any(target.inconclusive for target in self.targets)
        return INCONCLUSIVE if undecided else FAILED

    def result(self) -> ReleaseResult:
        """The release's result (release.json)."""
        timings = {step.name: step.seconds for step in self.steps}
        return ReleaseResult(
            schema_version=RELEASE_SCHEMA_VERSION,
            config=self.config,
            config_sha256=self.config_sha256,
            release_dir=self.release_dir,
            source_model=self.source_model,
            targets=[target.result() for target in self.targets],
            gate_batch_size=self.config.gates.gate_batch_size,
            bench=self.bench,
            plots=self.plots,
            steps=list(self.steps),
            reused_steps=[step.name for step in self.steps if step.reused],
            timings={**timings, "total_seconds": round(self.total_seconds, 3)},
            environment=self.environment,
            created_at=self.created_at,
            verdict=self.verdict,
            exit_code=self.exit_code,
            recommendation=self.recommendation,
            recommendation_reason=self.recommendation_reason,
            native_bench=self.native_bench,
            serving=self.serving,
            triton_repository=self.triton_repository,
        )
