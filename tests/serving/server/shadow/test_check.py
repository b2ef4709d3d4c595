"""The shadow check with real models and no server: the int8 ONNX Runtime artifact's answers on
the digits it was not calibrated on, offered through a real socket, run again by TensorFlow and
judged by the artifact's manifest. A good artifact on unshifted traffic holds, with the counts
an independent numpy check finds."""

from __future__ import annotations

import time

import pytest

from tests.helpers.serving_fixtures import artifact, small_model
from tests.helpers.user_model_fixtures import digits32
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
        _wait_until_compared(check, len(images))
    finally:
        tap.close()
        result = check.stop()
    assert result.dropped_samples == 0 and result.compared_samples == len(images)
    assert result.state == HOLDING and not result.fallback and not tap.fallback
    [figure] = result.figures
    assert (figure.successes, figure.samples) == (independent, len(images))
    assert figure.share_ci95 is not None and figure.share_ci95[0] >= 0.97
    assert said and said[-1].startswith("shadow: probabilities top-1 agreement holding")


def test_serve_reads_the_artifacts_manifest_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`trtconv serve` itself, through its command line in this process, with a shadow check:
    everything it decides in its own process (its runner, the inputs it sets, the batch cap,
    admission, the shadow check's judge, the summary's backend) comes from one reading of the
    manifest (before: four). Every file this process opens is seen, whichever way it is read
    (Path.read_text, open), so a new read anywhere on serve's path fails this test; Triton's
    model instances, processes of their own, read it themselves and are not counted."""
    import builtins
    import io
    import json

    from trtconv.cli import main

    path = artifact("ort", "int8")
    reads: list[str] = []
    opened = io.open

    def counted(file: object, *args: object, **kwargs: object) -> object:
        if str(file).endswith("manifest.json"):
            reads.append(str(file))
        return opened(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(io, "open", counted)
    monkeypatch.setattr(builtins, "open", counted)
    argv = ["serve", str(path), "--name", "digits", "--admission", "--shadow", "0.5"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--stop-after", "1", "--json"])
    monkeypatch.undo()
    assert exited.value.code == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["backend"], result["precision"], result["max_batch_size"]) == ("ort", "int8", 8)
    assert result["shadow"] is not None and result["max_queue_size"] is not None
    assert reads == [str(path / "manifest.json")]


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
        _wait_until_compared(check, len(images))
    finally:
        tap.close()
        result = check.stop()
    assert result.compared_samples == len(images)
    runs = check.native_traffic.batches
    assert sum(size * count for size, count in runs.items()) == len(images)
    assert sum(runs.values()) < len(images) and max(runs) > 1, runs  # run together, not alone


def _wait_until_compared(check: ShadowCheck, samples: int, timeout_s: float = 60.0) -> None:
    """Return once `check` has compared `samples` samples, or after `timeout_s` (the caller's
    asserts then say what was missing)."""
    deadline = time.monotonic() + timeout_s
    while check.result().compared_samples < samples and time.monotonic() < deadline:
        time.sleep(0.05)
