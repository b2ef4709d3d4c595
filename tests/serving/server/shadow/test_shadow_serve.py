"""`trtconv serve --shadow` on a shift nobody tuned to: the int8 artifact, calibrated and
validated on clean digits (it passed), serves digits from a noisy camera (Gaussian noise of
sigma 1). An independent check (ONNX Runtime and TensorFlow run here, their top-1 decisions
compared in numpy) finds the agreement below the manifest's 0.97; the live verdict must turn
failing within the samples its interval needs (at least the 125 that could show 0.97 at all,
rounded up to the check's batch), the native
model must then serve, its outputs exactly, and the disagreeing samples must be kept in a file
trtconv's data reader takes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.serving_fixtures import (
    artifact,
    left_running,
    pytriton_or_skip,
    serving_line,
    small_model,
)
from tests.helpers.user_model_fixtures import digits32
from trtconv.backends.registry import open_runner
from trtconv.calib.readers import read_model_data
from trtconv.calib.sources import split_holdout
from trtconv.core.processes import descendants
from trtconv.outputs.confidence import proportion_interval, samples_needed, samples_to_show
from trtconv.serving.server.shadow.check import BATCH_SAMPLES

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # converts a model, starts a server

REPOSITORY = Path(__file__).resolve().parents[4]
START_TIMEOUT_S = 180
FALLBACK_TIMEOUT_S = 60
AFTER_FALLBACK = 40  # requests sent once the native model serves


def started(argv: list[str]) -> tuple[subprocess.Popen[str], str, str]:
    """`trtconv ARGV` in its own session: (process, its URL, its metrics URL) once it serves."""
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    process = subprocess.Popen(
        [sys.executable, "-m", "trtconv", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, start_new_session=True,
    )  # fmt: skip
    line = serving_line(process, "digits", START_TIMEOUT_S)
    return (
        process,
        line.split(" at http://", 1)[1].split()[0],
        line.split("metrics ", 1)[1].split()[0],
    )


def shadow_metrics(url: str) -> dict[str, float]:
    """The page's trtconv_shadow_* samples, by name and labels, through Prometheus' parser."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("trtconv_shadow_"):
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


def ask(client: object, images: np.ndarray) -> np.ndarray:
    """One request per sample, one at a time: the served top scores."""
    import tritonclient.http as http

    answers = []
    for image in images:
        request = http.InferInput("image", [1, *image.shape], "FP32")
        request.set_data_from_numpy(image[None])
        answers.append(client.infer("digits", [request]).as_numpy("probabilities"))  # type: ignore[attr-defined]
    return np.concatenate(answers)


def test_a_shift_turns_the_verdict_failing_and_the_native_model_serves(tmp_path: Path) -> None:
    import tritonclient.http as http

    pytriton_or_skip()
    path, native_path = artifact("ort", "int8"), small_model()
    _, held_out = split_holdout(digits32())
    noise = np.random.default_rng(0).normal(0, 1.0, held_out.x.shape)
    shifted = (held_out.x + noise).astype(np.float32)
    with open_runner(path) as runner, open_runner(native_path) as native:
        served_here = runner.infer({"image": shifted})["probabilities"]
        native_here = native.infer({"image": shifted})["probabilities"]
        # one sample at a time, as the server runs the requests sent one at a time below (a
        # batch of another size rounds differently)
        alone = [native.infer({"image": image[None]})["probabilities"] for image in shifted]
        native_alone = np.concatenate(alone)
    agrees = served_here.argmax(1) == native_here.argmax(1)
    interval = proportion_interval(int(agrees.sum()), len(agrees))
    assert interval is not None and interval[1] < 0.97  # the shift surely broke the bound
    needed = samples_needed(float(agrees.mean()), 0.97)
    assert needed is not None

    argv = ["serve", str(path), "--name", "digits", "--json", "--instances", "1", "--shadow", "1"]
    argv += ["--on-failing", "fallback", "--shadow-capture", str(tmp_path / "captures")]
    process, url, metrics_url = started(argv)
    pids = [process.pid, *descendants(process.pid)]
    try:
        client = http.InferenceServerClient(url)
        first = ask(client, shifted)
        deadline = time.monotonic() + FALLBACK_TIMEOUT_S
        while not shadow_metrics(metrics_url)["trtconv_shadow_fallback{}"]:
            assert time.monotonic() < deadline, "the live verdict did not turn failing"
            time.sleep(0.2)
        found = shadow_metrics(metrics_url)
        figure = "figure=top-1 agreement,output=probabilities"
        assert found[f"trtconv_shadow_state{{{figure},state=failing}}"] == 1
        assert found[f"trtconv_shadow_share_upper{{{figure}}}"] < 0.97
        after = shifted[:AFTER_FALLBACK]
        assert np.array_equal(ask(client, after), native_alone[:AFTER_FALLBACK])  # exactly
        client.close()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, err
    assert "shadow: the live verdict is failing after" in err
    summary = json.loads(out)
    shadow = summary["shadow"]
    assert shadow["state"] == "failing" and shadow["fallback"]
    # decided once the samples that could show 0.97 at all are counted (125), updated per batch
    assert shadow["fallback_at_samples"] <= max(needed, samples_to_show(0.97) or 0) + BATCH_SAMPLES
    # The switch may come while the first pass is still sent: from then on, every answer is
    # the native model's (exactly), none before (int8 never rounds to float32's digits).
    switched = [bool(np.array_equal(a, b)) for a, b in zip(first, native_alone, strict=True)]
    served_native = sum(switched)
    assert switched == [False] * (len(first) - served_native) + [True] * served_native
    assert summary["native_served_requests"] == served_native + AFTER_FALLBACK
    assert summary["requests"] == len(first) + AFTER_FALLBACK
    [counted] = shadow["figures"]
    if shadow["dropped_samples"] == 0:  # the first samples, in order: the same count as here
        assert counted["successes"] == agrees[: counted["samples"]].sum()
    captured = Path(shadow["capture"])
    with np.load(captured) as kept:
        kept_served, kept_native = kept["served/probabilities"], kept["native/probabilities"]
    assert (
        len(kept_served) == shadow["captured_samples"] == counted["samples"] - counted["successes"]
    )
    assert np.all(kept_served.argmax(1) != kept_native.argmax(1))
    data = read_model_data(str(captured), summary_signature(path), role="all")
    assert len(data) == shadow["captured_samples"]
    assert left_running(pids) == []


def summary_signature(path: Path) -> object:
    from trtconv.artifact.manifest import read_manifest

    return read_manifest(path).model_signature


SERVING_DOC = REPOSITORY / "docs" / "serving.md"
FLEET = "figure=top-1 agreement,output=probabilities"


def fleet_rules() -> dict[str, str]:
    """The recording rules docs/serving.md gives for a fleet's verdict: {record: expr}."""
    text = SERVING_DOC.read_text()
    block = text.split("  - name: trtconv-shadow-fleet\n", 1)[1].split("```", 1)[0]
    rules = {}
    for entry in block.split("\n      - ")[1:]:
        if not entry.startswith("record: "):
            continue
        name = entry.removeprefix("record: ").split()[0]
        expr = entry.split("expr: ", 1)[1]
        if expr.startswith(">-"):  # a folded scalar: its more indented lines, joined
            lines = expr.splitlines()[1:]
            expr = " ".join(line.strip() for line in lines if line.startswith(" " * 10))
        rules[name] = expr.strip()
    return rules


def evaluated(expr: str, sums: dict[str, float]) -> float:
    """A rule's arithmetic (one series: no labels to match), its recorded series given."""
    import math
    import re

    python = re.sub(r"trtconv_shadow_fleet:(\w+)", r"sums['\1']", expr)
    python = python.replace("sqrt(", "math.sqrt(").replace("^", "**")
    return float(eval(python, {"math": math, "sums": sums}))


def test_two_replicas_pages_summed_give_the_interval_of_one_server_given_all_the_traffic() -> None:
    """Two replicas with --shadow 1, each given half of the noisy digits; their counters summed
    as Prometheus' recording rules sum them (the docs' very expressions, evaluated), against
    the interval the first replica reports once it is given the other half too."""
    import tritonclient.http as http

    pytriton_or_skip()
    path = artifact("ort", "int8")
    _, held_out = split_holdout(digits32())
    images = held_out.x[:120]
    noise = np.random.default_rng(1).normal(0, 0.8, images.shape)
    shifted = (images + noise).astype(np.float32)
    halves = shifted[:60], shifted[60:]  # each below the tap's queue of 64: nothing dropped
    argv = ["serve", str(path), "--name", "digits", "--instances", "1", "--shadow", "1"]
    replicas = [started(argv), started(argv)]
    pids = [pid for process, _, _ in replicas for pid in [process.pid, *descendants(process.pid)]]
    try:
        for (_, url, _), half in zip(replicas, halves, strict=True):
            client = http.InferenceServerClient(url)
            ask(client, half)
            client.close()
        pages = [compared(metrics_url, 60) for _, _, metrics_url in replicas]
        sums = {
            "samples": sum(page[f"trtconv_shadow_samples_total{{{FLEET}}}"] for page in pages),
            "agreeing_samples": sum(
                page[f"trtconv_shadow_agreeing_samples_total{{{FLEET}}}"] for page in pages
            ),
        }
        _, url, metrics_url = replicas[0]
        client = http.InferenceServerClient(url)
        ask(client, halves[1])  # the first replica now has all the traffic
        client.close()
        whole = compared(metrics_url, 120)
    finally:
        for process, _, _ in replicas:
            process.kill()
    rules = fleet_rules()
    for record, counter in (("samples", "samples"), ("agreeing_samples", "agreeing_samples")):
        summed = f"sum by (output, figure) (trtconv_shadow_{counter}_total)"
        assert rules[f"trtconv_shadow_fleet:{record}"] == summed  # what `sums` holds
    sums["share"] = evaluated(rules["trtconv_shadow_fleet:share"], sums)
    low = evaluated(rules["trtconv_shadow_fleet:share_lower"], sums)
    high = evaluated(rules["trtconv_shadow_fleet:share_upper"], sums)
    assert sums["samples"] == whole[f"trtconv_shadow_samples_total{{{FLEET}}}"] == 120
    assert sums["agreeing_samples"] == whole[f"trtconv_shadow_agreeing_samples_total{{{FLEET}}}"]
    assert 0 < sums["agreeing_samples"] < 120  # the noise moved some decisions, not all
    assert sums["share"] == whole[f"trtconv_shadow_share{{{FLEET}}}"]
    assert abs(low - whole[f"trtconv_shadow_share_lower{{{FLEET}}}"]) < 1e-12
    assert abs(high - whole[f"trtconv_shadow_share_upper{{{FLEET}}}"]) < 1e-12
    # The alert's comparison reads the floor and the bound every replica publishes.
    assert whole[f"trtconv_shadow_samples_floor{{{FLEET}}}"] == samples_to_show(0.97)
    assert whole[f"trtconv_shadow_minimum{{{FLEET}}}"] == 0.97
    assert left_running(pids) == []


def compared(metrics_url: str, samples: int) -> dict[str, float]:
    """The replica's shadow metrics once it has compared `samples` samples (none dropped)."""
    deadline = time.monotonic() + FALLBACK_TIMEOUT_S
    while (found := shadow_metrics(metrics_url))["trtconv_shadow_compared_samples_total{}"] < (
        samples
    ):
        assert time.monotonic() < deadline, found
        time.sleep(0.1)
    assert found["trtconv_shadow_dropped_samples_total{}"] == 0
    return found
