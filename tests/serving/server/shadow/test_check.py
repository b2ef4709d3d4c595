"""The shadow check with real models and no server: the int8 ONNX Runtime artifact's answers on
the digits it was not calibrated on, offered through a real socket, run again by TensorFlow and
judged by the artifact's manifest. A good artifact on unshifted traffic holds, with the counts
an independent numpy check finds."""

from __future__ import annotations

import time

import pytest

from tests.helpers.convert_fixtures import digits32
from tests.helpers.serving_fixtures import artifact, small_model
from trtconv.artifact.manifest import read_manifest
from trtconv.backends.registry import open_runner
from trtconv.calib.sources import split_holdout
from trtconv.serving.server.shadow.check import NativeModel, ShadowCheck
from trtconv.serving.server.shadow.judge import ShadowJudge
from trtconv.serving.server.shadow.link import ShadowTap
from trtconv.serving.server.shadow.verdict import HOLDING

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # converts a small model


def test_a_good_artifact_on_unshifted_traffic_holds() -> None:
    path, native_path = artifact("ort", "int8"), small_model()
    manifest = read_manifest(path)
    _, held_out = split_holdout(digits32())  # never calibrated on
    images = held_out.x
    with open_runner(path) as runner:
        served = runner.infer({"image": images})["probabilities"]
    with open_runner(native_path) as native:
        reference = native.infer({"image": images})["probabilities"]
    independent = int((served.argmax(1) == reference.argmax(1)).sum())
    said: list[str] = []
    check = ShadowCheck(
        ShadowJudge(manifest, native_path),
        NativeModel(native_path, None, signature=manifest.model_signature.name),
        1.0,
        "fallback",
        None,
        said.append,
    )
    check.start(8, True)
    tap = ShadowTap(1.0, check.address, check.key)
    try:
        for first in range(0, len(images), 3):  # requests of 3 samples, as a batcher groups
            rows = slice(first, first + 3)
            tap.offer({"image": images[rows]}, {"probabilities": served[rows]})
            time.sleep(0.002)  # a paced client: the check keeps up, nothing is dropped
        deadline = time.monotonic() + 60
        while check.result().compared_samples < len(images) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        tap.close()
        result = check.stop()
    assert result.dropped_samples == 0 and result.compared_samples == len(images)
    assert result.state == HOLDING and not result.fallback and not tap.fallback
    [figure] = result.figures
    assert (figure.successes, figure.samples) == (independent, len(images))
    assert figure.share_ci95 is not None and figure.share_ci95[0] >= 0.97
    assert said and said[-1].startswith("shadow: probabilities top-1 agreement holding")


def test_serve_reads_the_artifacts_manifest_once_on_the_way_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Everything `serve` decides before Triton starts (its runner, the inputs it sets, the batch
    cap, admission, the summary's backend) comes from one reading (before: four)."""
    from pathlib import Path

    from trtconv.options import ServeOptions
    from trtconv.protocol.runner import RunOptions
    from trtconv.serving.repository.fixed_inputs import served
    from trtconv.serving.server.serve_plan import plan
    from trtconv.serving.server.served_from import ServedFrom

    path = artifact("ort", "int8")
    reads: list[Path] = []
    read_text = Path.read_text

    def counted(self: Path, *args: object, **kwargs: object) -> str:
        if self.name == "manifest.json":
            reads.append(self)
        return read_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    source = ServedFrom.read(path)
    runner = source.open_runner(RunOptions(spin=False))
    runner.activate()
    try:
        model = served(runner, source.input_values)
        decided = plan(model, ServeOptions(path, admission=True), source)
    finally:
        runner.deactivate()
    assert source.kind == ("ort", "int8") and decided.max_batch == 8
    assert len(reads) == 1


def test_samples_that_arrive_one_by_one_are_run_by_the_native_model_together() -> None:
    """At a low rate each shadowed request arrives alone; the check gathers them (up to
    GATHER_SAMPLES, or GATHER_S after the first) and runs the native model once on them."""
    path, native_path = artifact("ort", "int8"), small_model()
    manifest = read_manifest(path)
    _, held_out = split_holdout(digits32())
    images = held_out.x[:12]
    with open_runner(path) as runner:
        served = runner.infer({"image": images})["probabilities"]
    check = ShadowCheck(
        ShadowJudge(manifest, native_path),
        NativeModel(native_path, None, signature=manifest.model_signature.name),
        1.0, "warn", None, lambda line: None,
    )  # fmt: skip
    check.start(8, True)
    tap = ShadowTap(1.0, check.address, check.key)
    try:
        for row in range(len(images)):  # one sample a request, a few ms apart
            tap.offer({"image": images[row : row + 1]}, {"probabilities": served[row : row + 1]})
            time.sleep(0.005)
        deadline = time.monotonic() + 60
        while check.result().compared_samples < len(images) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        tap.close()
        result = check.stop()
    assert result.compared_samples == len(images)
    runs = check.native_traffic.batches
    assert sum(size * count for size, count in runs.items()) == len(images)
    assert sum(runs.values()) < len(images) and max(runs) > 1, runs  # run together, not alone
