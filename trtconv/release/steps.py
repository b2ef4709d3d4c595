"""The steps of a release, each reusable on --resume when its inputs are unchanged.

Every step goes through `ReleaseRun.step`: a step whose input key and outputs are unchanged is
reused; otherwise its record is dropped, its outputs are written atomically and its record is
written last (store.py), so an interrupted step is never mistaken for a finished one.

The steps call the pipelines (train, convert, validate, bench) with the options objects the
config builds, and record each result as its JSON document: a record is JSON, and a reused
step gives back exactly what the first run recorded.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from trtconv import __version__
from trtconv.backends import registry
from trtconv.backends.registry import BEST
from trtconv.bench import harness
from trtconv.calib.sources import DIGITS
from trtconv.convert import convert
from trtconv.convert.convert_result import ConvertResult
from trtconv.core.errors import AccuracyError, TrtconvError
from trtconv.core.fsutil import atomic_directory, sha256_path
from trtconv.core.precision import Precision
from trtconv.core.progress import Progress
from trtconv.core.results import JsonResult, to_jsonable
from trtconv.facts import library_versions, probe_cpu, probe_gpus
from trtconv.measure.bench_result import BenchResult
from trtconv.measure.server_bench_result import ServerBenchResult
from trtconv.options.deploy import DeployOptions
from trtconv.options.server_bench import ServerBenchOptions
from trtconv.release.command_options import (
    bench_data,
    bench_options,
    budget,
    contest,
    convert_options,
    train_options,
    validate_options,
)
from trtconv.release.document import CONVERTED, FAILED_TO_CONVERT, Conversion, StepEntry, StepError
from trtconv.release.settings import ReleaseConfig, Target
from trtconv.release.store import StepStore
from trtconv.serving.load.rate_search import server_bench
from trtconv.serving.repository.deploy import deploy
from trtconv.train import pipeline as training
from trtconv.train.pipeline import TrainResult
from trtconv.validate import pipeline as validation
from trtconv.validate.pipeline import ValidateResult

log = logging.getLogger(__name__)

# Bump when a step's behaviour changes in a way its recorded inputs cannot show.
STEP_VERSION = 2

R = TypeVar("R", bound=JsonResult)
Work = Callable[[], tuple[R, list[Path]]]
SERVING_DIR, SERVING_RESULT, TRITON_DIR = "serving", "result.json", "triton"


def data_fingerprint(spec: str | None) -> dict[str, Any] | None:
    """What identifies a data source's content: its sha256, or the library that ships it."""
    if spec is None:
        return None
    if spec == DIGITS:
        return {"source": spec, "scikit-learn": _version("scikit-learn")}
    if spec == "random":
        return {"source": spec}
    return {"source": spec, "sha256": sha256_path(Path(spec))}


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class DeviceFingerprint:
    """The hardware a converted artifact may be specialised for (ORT layouts, TensorRT engines):
    part of every step's key, as its fields name it."""

    cpu: str
    cpu_features: dict[str, bool]
    gpus: list[dict[str, Any]]


def device_fingerprint() -> DeviceFingerprint:
    """This machine's DeviceFingerprint."""
    cpu = probe_cpu()
    gpus = [gpu.to_dict() for gpu in probe_gpus()]
    return DeviceFingerprint(cpu.model, cpu.block().features, gpus)


class ReleaseRun:
    """One release: its config, its directory, its steps so far."""

    def __init__(
        self,
        config: ReleaseConfig,
        directory: Path,
        resume: bool,
        progress: Progress | None = None,
    ) -> None:
        self.config = config
        self.directory = directory
        self.resume = resume
        self.store = StepStore(directory)
        self.steps: list[StepEntry] = []
        self.tools = {**library_versions(registry.declared_packages()), "trtconv": __version__}
        self.device = device_fingerprint()
        self.progress = progress
        evals = len(config.targets) if config.eval.data else 0
        serving = config.serving.latency_budget_ms is not None
        self.planned = (config.model.zoo is not None) + len(config.targets) + evals + 1 + serving

    def report(self, label: str) -> None:
        """Tell the progress callback (if any) what runs now."""
        if self.progress is not None:
            self.progress(len(self.steps), self.planned, label)

    def finish(self) -> None:
        """Tell the progress callback that all is done (fewer steps than planned if some failed)."""
        if self.progress is not None:
            self.progress(len(self.steps), len(self.steps), "done")

    def step(self, name: str, inputs: dict[str, Any], work: Work[R], kind: type[R]) -> R:
        """Reuse `name` if its inputs and outputs are unchanged, else run `work` and record it
        (its result's JSON document); returns the step's result, a `kind`, as recorded."""
        # Every step's result depends on the tools and the hardware besides its own inputs.
        machine = {"tools": self.tools, "device": self.device}
        inputs = to_jsonable({"step_version": STEP_VERSION, **inputs, **machine})
        record, reason = self.store.lookup(name, inputs)
        if record is not None and self.resume:
            log.info("step %s: reused (%s)", name, reason)
            self.steps.append(StepEntry(name, True, reason, 0.0, round(record.seconds, 3)))
            return kind.from_json(record.result)
        log.info("step %s: running (%s)", name, reason if self.resume else "fresh run")
        self.report(name)
        self.store.forget(name)  # from here until the record is rewritten, the step is undone
        started = time.perf_counter()
        result, outputs = work()
        seconds = time.perf_counter() - started
        document = result.to_json()
        self.store.record(name, inputs, document, outputs, seconds)
        self.steps.append(StepEntry(name, False, reason, round(seconds, 3), round(seconds, 3)))
        return kind.from_json(document)  # as a resumed run reads it back

    # train -----------------------------------------------------------------------------------

    def source_model(self) -> tuple[Path, TrainResult | None]:
        """The SavedModel to release and the model card of the `train` step (None when the
        config names a SavedModel)."""
        if self.config.model.path is not None:
            return self.config.model.path, None
        settings = self.config.train
        assert settings is not None  # config.py gives model.zoo its [train] settings
        output = self.directory / "model"
        inputs = {
            "zoo": self.config.model.zoo,
            "train": asdict(settings),
            "data": data_fingerprint(settings.data),
        }

        def work() -> tuple[TrainResult, list[Path]]:
            return training.train(train_options(self.config, output)), [output]

        card = self.step("train", inputs, work, TrainResult)
        return output / "saved_model", card

    # convert ---------------------------------------------------------------------------------

    def convert(self, target: Target, source: Path, source_sha: str) -> Conversion:
        """Convert one target; a known failure is recorded as the target's result, not raised.
        Returns the step's result: `status` ("converted" or "failed") and convert's result or
        the `error`."""
        output = self.directory / "artifacts" / target.id

        def work() -> tuple[Conversion, list[Path]]:
            log.info("converting %s (%s %s)", target.id, target.backend, target.precision)
            try:
                result = convert(convert_options(self.config, target, source, output))
            except AccuracyError as exc:
                # Outside tolerance: the artifact is written and marked failed; keep its figures.
                result = _carried(exc, ConvertResult)
            except TrtconvError as exc:
                log.warning("target %s failed: %s", target.id, exc)
                shutil.rmtree(output, ignore_errors=True)  # a stale artifact must not look current
                return Conversion(FAILED_TO_CONVERT, error=StepError.of(exc)), []
            return Conversion(CONVERTED, result), [output]

        inputs = self._convert_inputs(target, source_sha)
        return self.step(f"convert-{target.id}", inputs, work, Conversion)

    def _convert_inputs(self, target: Target, source_sha: str) -> dict[str, Any]:
        """What a conversion's result depends on (its resume key)."""
        calibration = self.config.calibration
        int8_only = {
            "method": calibration.method,
            "samples": calibration.samples,
            "int8_target": calibration.int8_target,
            "fallback": calibration.fallback,
            "fallback_time_limit_s": calibration.fallback_time_limit_s,
        }
        return {
            "source_sha256": source_sha,
            "backend": target.backend,
            "precision": target.precision,
            "tolerance": target.tolerance,
            **({"rtol": target.rtol} if target.rtol is not None else {}),
            # Its data also supplies every target's validation samples; method and samples
            # matter only to int8, so changing them does not redo the other conversions.
            "calibration": {
                "data": data_fingerprint(calibration.data),
                **(int8_only if target.precision in (Precision.INT8, None) else {}),
            },
            "contest": asdict(contest(self.config)) if target.backend == BEST else None,
            "batch_sizes": list(self.config.bench.batch_sizes),
            "validate_samples": self.config.eval.samples,
            # [eval]'s data validates the conversion too (convert --validate-data).
            **(
                {"validate_data": data_fingerprint(self.config.eval.data)}
                if self.config.eval.data
                else {}
            ),
            **({"split": self.config.eval.split} if self.config.eval.split else {}),
            "budget": budget(self.config, target),
            **self._judging_inputs(target),
        }

    def _judging_inputs(self, target: Target | None) -> dict[str, Any]:
        """What judging depends on besides the data: the signature (when one is chosen: keys
        of releases without one stay as they were), preprocessing and the output settings."""
        outputs, signature = self.config.outputs, self.config.model.signature
        return {
            **({"signature": signature} if signature else {}),
            # input_values only when set: keys of releases without them stay as they were
            "preprocessing": {
                key: value
                for key, value in asdict(self.config.preprocessing).items()
                if value is not None or key != "input_values"
            },
            "outputs": {
                "roles": {**outputs.roles, **(target.roles if target else {})},
                "tolerances": {**outputs.tolerances, **(target.tolerances if target else {})},
                **_minimums(outputs.min_within, target),
                **_rtols(outputs.rtols, target),
                "allow_unjudged": outputs.allow_unjudged,
                **({"labels_output": outputs.labels_output} if outputs.labels_output else {}),
            },
        }

    # eval ------------------------------------------------------------------------------------

    def evaluate(
        self, target: Target, artifact: Path, source: Path, source_sha: str
    ) -> ValidateResult | None:
        """Accuracy and top-1 agreement on the [eval] data: validate's result, also when the
        artifact failed it (None without an [eval] table)."""
        settings = self.config.eval
        if settings.data is None:
            return None
        inputs = {
            "source_sha256": source_sha,
            "artifact_sha256": sha256_path(artifact),
            "data": data_fingerprint(settings.data),
            "samples": settings.samples,
            "split": settings.split,
            "tolerance": target.tolerance,
            **({"rtol": target.rtol} if target.rtol is not None else {}),
            **self._judging_inputs(target),
        }

        def work() -> tuple[ValidateResult, list[Path]]:
            log.info("evaluating %s on %s", target.id, settings.data)
            try:
                result = validation.validate(
                    validate_options(self.config, target, artifact, source)
                )
            except AccuracyError as exc:  # outside tolerance: the gates judge its figures
                result = _carried(exc, ValidateResult)
            return result, []

        return self.step(f"eval-{target.id}", inputs, work, ValidateResult)

    # bench -----------------------------------------------------------------------------------

    def bench(self, source: Path, source_sha: str, artifacts: dict[str, Path]) -> BenchResult:
        """Bench native and every artifact in one harness run; returns the bench's result, its
        report and plots under bench/."""
        output = self.directory / "bench"
        inputs = {
            "source_sha256": source_sha,
            "artifacts": {name: sha256_path(path) for name, path in artifacts.items()},
            "settings": asdict(self.config.bench),
            "data": data_fingerprint(bench_data(self.config)),
            "eval_data": data_fingerprint(self.config.eval.data),
            "split": self.config.eval.split,
            **self._judging_inputs(None),
        }

        def progress(done: int, total: int, label: str) -> None:
            self.report(f"bench {label} ({done}/{total})")

        # The speed gates are the bench's goal (extra rounds while undecided) but not part of its
        # key: changing a gate re-judges the recorded bench, as for every other gate.
        def work() -> tuple[BenchResult, list[Path]]:
            log.info("benchmarking native and %d artifact(s)", len(artifacts))
            # The report (results.json, plots) is written atomically by the bench's writer.
            options = bench_options(self.config, [source, *artifacts.values()], output)
            return harness.bench(options, progress), [output]

        return self.step("bench", inputs, work, BenchResult)

    # serving and deploy -----------------------------------------------------------------------

    def serving(
        self, source: Path, source_sha: str, artifacts: dict[str, Path]
    ) -> ServerBenchResult:
        """Serve native and every artifact (`bench --scenario server`) at [serving]'s latency
        budget; its result, also written as serving/result.json (what [deploy] tunes from)."""
        settings = self.config.serving
        output = self.directory / SERVING_DIR
        inputs = {
            "source_sha256": source_sha,
            "artifacts": {name: sha256_path(path) for name, path in artifacts.items()},
            "settings": asdict(settings),
        }

        def work() -> tuple[ServerBenchResult, list[Path]]:
            assert settings.latency_budget_ms is not None
            log.info("serving native and %d artifact(s) under load", len(artifacts))
            options = ServerBenchOptions(
                (source, *artifacts.values()),
                settings.latency_budget_ms,
                settings.duration_s,
                settings.search_runs,
            )
            result = server_bench(options)
            with atomic_directory(output, force=True) as staging:
                result.save(staging / SERVING_RESULT)
            return result, [output]

        return self.step("serving", inputs, work, ServerBenchResult)

    def deploy(self, artifact: Path, served: bool) -> str:
        """The Triton repository of `artifact` under triton/ (batching from the serving run's
        result when `served`); its path relative to the release directory. Not a reusable
        step: it copies one artifact and takes a second."""
        output = self.directory / TRITON_DIR
        serving = self.directory / SERVING_DIR / SERVING_RESULT if served else None
        log.info("writing the Triton repository of %s to %s", artifact, output)
        deploy(DeployOptions((artifact,), output, force=True, serving=serving))
        return TRITON_DIR


def _carried(exc: AccuracyError, kind: type[R]) -> R:
    """The result an AccuracyError carries (the pipeline's, outside tolerance), as `kind`."""
    if isinstance(exc.result, kind):
        return exc.result
    document = exc.result.to_json() if isinstance(exc.result, JsonResult) else exc.result
    return kind.from_json(document or {})


def _minimums(release_wide: dict[str, float], target: Target | None) -> dict[str, dict[str, float]]:
    """The minimum shares within tolerance as a judging input, only when some is set: keys of
    releases without them stay as they were (their steps resume)."""
    minimums = {**release_wide, **(target.min_within if target else {})}
    return {"min_within": minimums} if minimums else {}


def _rtols(release_wide: dict[str, float], target: Target | None) -> dict[str, dict[str, float]]:
    """The per-output relative tolerances as a judging input, only when some is set (keys of
    releases without them stay as they were)."""
    rtols = {**release_wide, **(target.rtols if target else {})}
    return {"rtols": rtols} if rtols else {}
