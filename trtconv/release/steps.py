"""The steps of a release, each reusable on --resume when its inputs are unchanged.

Every step goes through `ReleaseRun.step`: a step whose input key and outputs are unchanged is
reused; otherwise its record is dropped, its outputs are written atomically and its record is
written last (store.py), so an interrupted step is never mistaken for a finished one.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trtconv import __version__
from trtconv.backends import registry
from trtconv.backends.registry import BEST
from trtconv.core.errors import AccuracyError, TrtconvError
from trtconv.core.fsutil import sha256_path
from trtconv.core.results import JsonResult
from trtconv.facts import library_versions, probe_cpu, probe_gpus
from trtconv.options import DEFAULT_RANK_DURATION_S, Contest, ValidateOptions
from trtconv.release.config import DIGITS, ReleaseConfig, Target
from trtconv.release.store import StepStore

log = logging.getLogger(__name__)

# Bump when a step's behaviour changes in a way its recorded inputs cannot show.
STEP_VERSION = 2

Work = Callable[[], tuple[dict[str, Any], list[Path]]]
# (steps done, steps planned, what runs now): drives a progress bar on a TTY, nothing otherwise.
Progress = Callable[[int, int, str], None]


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
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def device_fingerprint() -> dict[str, Any]:
    """The hardware a converted artifact may be specialised for (ORT layouts, TensorRT engines)."""
    cpu = probe_cpu().to_dict()
    gpus = [gpu.to_dict() for gpu in probe_gpus()]
    return {"cpu": cpu["model"], "cpu_features": cpu["features"], "gpus": gpus}


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
        self.steps: list[dict[str, Any]] = []
        self.tools = {**library_versions(registry.declared_packages()), "trtconv": __version__}
        self.device = device_fingerprint()
        self.progress = progress
        evals = len(config.targets) if config.eval.data else 0
        self.planned = (config.model.zoo is not None) + len(config.targets) + evals + 1

    def report(self, label: str) -> None:
        """Tell the progress callback (if any) what runs now."""
        if self.progress is not None:
            self.progress(len(self.steps), self.planned, label)

    def finish(self) -> None:
        """Tell the progress callback that all is done (fewer steps than planned if some failed)."""
        if self.progress is not None:
            self.progress(len(self.steps), len(self.steps), "done")

    def step(self, name: str, inputs: dict[str, Any], work: Work) -> dict[str, Any]:
        """Reuse `name` if its inputs and outputs are unchanged, else run `work` and record it."""
        inputs = {"step_version": STEP_VERSION, **inputs}
        record, reason = self.store.lookup(name, inputs)
        if record is not None and self.resume:
            log.info("step %s: reused (%s)", name, reason)
            self._note(name, True, reason, 0.0, record.seconds)
            return record.result
        log.info("step %s: running (%s)", name, reason if self.resume else "fresh run")
        self.report(name)
        self.store.forget(name)  # from here until the record is rewritten, the step is undone
        started = time.perf_counter()
        result, outputs = work()
        seconds = time.perf_counter() - started
        self.store.record(name, inputs, result, outputs, seconds)
        self._note(name, False, reason, seconds, seconds)
        return result

    def _note(self, name: str, reused: bool, reason: str, seconds: float, recorded: float) -> None:
        self.steps.append(
            {
                "name": name,
                "reused": reused,
                "reason": reason,
                "seconds": round(seconds, 3),
                "recorded_seconds": round(recorded, 3),
            }
        )

    # train -----------------------------------------------------------------------------------

    def source_model(self) -> tuple[Path, dict[str, Any] | None]:
        """The SavedModel to release: the configured one, or one trained by the `train` step."""
        if self.config.model.path is not None:
            return self.config.model.path, None
        settings = self.config.train
        zoo = self.config.model.zoo
        assert settings is not None and zoo is not None  # config.py guarantees both
        output = self.directory / "model"
        inputs = {
            "zoo": zoo,
            "train": asdict(settings),
            "data": data_fingerprint(settings.data),
            "tools": self.tools,
            "device": self.device,
        }

        def work() -> tuple[dict[str, Any], list[Path]]:
            from trtconv import api

            card = api.train(
                model=zoo,
                data=settings.data,
                epochs=settings.epochs,
                batch_size=settings.batch_size,
                amp=settings.amp,
                amp_dtype=settings.amp_dtype,
                xla=settings.xla,
                seed=settings.seed,
                output=output,
                force=True,
            )
            return card, [output]

        card = self.step("train", inputs, work)
        return output / "saved_model", card

    # convert ---------------------------------------------------------------------------------

    def convert(self, target: Target, source: Path, source_sha: str) -> dict[str, Any]:
        """Convert one target; a known failure is recorded as the target's result, not raised."""
        calibration = self.config.calibration
        output = self.directory / "artifacts" / target.id
        budget = self.budget(target)

        def work() -> tuple[dict[str, Any], list[Path]]:
            from trtconv import api

            options: dict[str, Any] = {}
            if calibration.samples is not None:
                options["calib_samples"] = calibration.samples
            if self.config.eval.samples is not None:
                options["validate_samples"] = self.config.eval.samples
            log.info("converting %s (%s %s)", target.id, target.backend, target.precision)
            try:
                result = api.convert(
                    saved_model=source,
                    precision=target.precision,
                    backend=target.backend,
                    output=output,
                    calib_data=calibration.data,
                    calib_method=calibration.method,
                    int8_target=calibration.int8_target,
                    fallback=calibration.fallback,
                    fallback_time_limit=calibration.fallback_time_limit_s,
                    batch_sizes=self.config.bench.batch_sizes,
                    tolerance=target.tolerance,
                    force=True,
                    min_top1_agreement=budget.get("min_top1_agreement"),
                    max_accuracy_drop=budget.get("max_accuracy_drop"),
                    preprocessing=self.config.preprocessing.options(),
                    judging=self.config.outputs.judging(target),
                    contest=self._contest(),
                    **options,
                )
            except AccuracyError as exc:
                # Outside tolerance: the artifact is written and marked failed; keep its figures.
                result = exc.result or {}  # type: ignore[assignment]
            except TrtconvError as exc:
                log.warning("target %s failed: %s", target.id, exc)
                shutil.rmtree(output, ignore_errors=True)  # a stale artifact must not look current
                return {"status": "failed", "error": _error(exc)}, []
            return {"status": "converted", **result}, [output]

        return self.step(f"convert-{target.id}", self._convert_inputs(target, source_sha), work)

    def _contest(self) -> Contest:
        """How a `best` target times its candidates: at the gate batch size, as [bench] says."""
        bench = self.config.bench
        duration = bench.duration_s if bench.duration_s is not None else DEFAULT_RANK_DURATION_S
        batch = self.config.gates.gate_batch_size
        return Contest(batch, duration, bench.threads, bench.iterations)

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
            # Its data also supplies every target's validation samples; method and samples
            # matter only to int8, so changing them does not redo the other conversions.
            "calibration": {
                "data": data_fingerprint(calibration.data),
                **(int8_only if target.precision in ("int8", None) else {}),
            },
            "contest": asdict(self._contest()) if target.backend == BEST else None,
            "batch_sizes": list(self.config.bench.batch_sizes),
            "validate_samples": self.config.eval.samples,
            "budget": self.budget(target),
            **self._judging_inputs(target),
            "tools": self.tools,
            "device": self.device,
        }

    def budget(self, target: Target) -> dict[str, float]:
        """The accuracy gates as convert's limits, where stricter than the precision's own: the
        int8 ladder climbs until they hold, and validation judges them."""
        from trtconv.outputs.tolerance import tolerance_for

        limits: dict[str, float] = {}
        if target.precision is None:
            # `best` without a precision: each candidate is judged by its own precision's
            # tolerance (a gate over all of them would loosen int8 or tighten fp32); the release
            # gates then judge the winner.
            return limits
        gates, own = self.config.gates, tolerance_for(target.precision)
        if gates.min_top1_agreement is not None:
            limits["min_top1_agreement"] = max(gates.min_top1_agreement, own.min_top1_agreement)
        if gates.max_accuracy_drop is not None:
            limits["max_accuracy_drop"] = min(gates.max_accuracy_drop, own.max_accuracy_drop)
        return limits

    def _judging_inputs(self, target: Target | None) -> dict[str, Any]:
        """What judging depends on besides the data: preprocessing and the output settings."""
        outputs = self.config.outputs
        return {
            "preprocessing": asdict(self.config.preprocessing),
            "outputs": {
                "roles": {**outputs.roles, **(target.roles if target else {})},
                "tolerances": {**outputs.tolerances, **(target.tolerances if target else {})},
                "allow_unjudged": outputs.allow_unjudged,
            },
        }

    # eval ------------------------------------------------------------------------------------

    def evaluate(self, target: Target, artifact: Path, source: Path, source_sha: str) -> Any:
        """Accuracy and top-1 agreement on the [eval] data (None without an [eval] table)."""
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
            **self._judging_inputs(target),
            "tools": self.tools,
            "device": self.device,
        }

        def work() -> tuple[dict[str, Any], list[Path]]:
            from trtconv import api

            log.info("evaluating %s on %s", target.id, settings.data)
            try:
                validated = api.validate(
                    ValidateOptions(
                        artifact,
                        reference=source,
                        data=settings.data,
                        samples=settings.samples,
                        tolerance=target.tolerance,
                        judging=self.config.outputs.judging(target),
                        preprocessing=self.config.preprocessing.options(),
                        split=settings.split,
                    )
                )
                result = validated.to_json()
            except AccuracyError as exc:  # outside tolerance: the gates judge its figures
                failed = exc.result
                result = failed.to_json() if isinstance(failed, JsonResult) else failed or {}
            return result, []

        return self.step(f"eval-{target.id}", inputs, work)

    # bench -----------------------------------------------------------------------------------

    def bench(self, source: Path, source_sha: str, artifacts: dict[str, Path]) -> dict[str, Any]:
        """Bench native and every artifact in one harness run; results and plots under bench/."""
        settings = self.config.bench
        output = self.directory / "bench"
        data = settings.data or self.config.eval.data or self.config.calibration.data
        inputs = {
            "source_sha256": source_sha,
            "artifacts": {name: sha256_path(path) for name, path in artifacts.items()},
            "settings": asdict(settings),
            "data": data_fingerprint(data),
            "eval_data": data_fingerprint(self.config.eval.data),
            "split": self.config.eval.split,
            **self._judging_inputs(None),
            "tools": self.tools,
            "device": self.device,
        }

        def work() -> tuple[dict[str, Any], list[Path]]:
            from trtconv import api

            options: dict[str, Any] = {}
            for key in ("iterations", "duration_s", "warmup", "threads"):
                if getattr(settings, key) is not None:
                    options[key] = getattr(settings, key)
            log.info("benchmarking native and %d artifact(s)", len(artifacts))
            # The report (results.json, plots) is written atomically by the bench's writer.
            result = api.bench(
                [source, *artifacts.values()],
                batch_sizes=settings.batch_sizes,
                data=data,
                eval_data=self.config.eval.data,
                report=output,
                force=True,
                progress=lambda done, total, label: self.report(f"bench {label} ({done}/{total})"),
                judging=self.config.outputs.judging(),
                preprocessing=self.config.preprocessing.options(),
                split=self.config.eval.split,
                **options,
            )
            return result, [output]

        return self.step("bench", inputs, work)


def _error(exc: TrtconvError) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc), "exit_code": exc.exit_code}
