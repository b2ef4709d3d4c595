"""`convert --backend best` on the real digits-cnn: every backend and precision that runs here is
converted, validated and timed; the fastest validated one is the artifact, and the table says why
each other one lost."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from tests.helpers.text_fixtures import KERAS_HUB, bert_models, bert_tokens_npz
from trtconv.artifact.manifest import read_manifest
from trtconv.backends import registry
from trtconv.cli import main
from trtconv.cli.convert import render_conversion
from trtconv.convert import ConvertResult, tournament

pytestmark = pytest.mark.slow  # converts digits-cnn with every CPU backend and times each


def run(argv: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI in-process; (exit code, stdout, stderr) at the file-descriptor level, so
    that anything a library prints from C++ counts too."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    out, err = capfd.readouterr()
    return int(stopped.value.code or 0), out, err


def test_best_picks_the_fastest_validated_candidate_and_explains_the_table(
    digits_saved_model: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trtconv.backends.openvino import ir

    made = []  # OpenVINO's float IR: made once for all its candidates, not once per precision
    real = ir.model_from_saved_model
    monkeypatch.setattr(ir, "model_from_saved_model", lambda *a: made.append(a) or real(*a))
    output = tmp_path / "digits-best"
    argv = [
        "convert", str(digits_saved_model), "--backend", "best", "--calib-data", "digits",
        "--calib-samples", "256", "--validate-samples", "450", "--rank-duration", "0.3",
        "--output", str(output), "--json",
    ]  # flags beside values # fmt: skip
    code, out, err = run(argv, capfd)
    assert code == 0, err
    result = json.loads(out)  # stdout is exactly one JSON document (NNCF's bars go to stderr)
    table = result["tournament"]
    rows = {row["name"]: row for row in table["candidates"]}
    assert len(made) == 1
    winner = rows[table["winner"]]
    assert winner["verdict"] == tournament.WINNER
    assert (result["backend"], result["precision"]) == (winner["backend"], winner["precision"])
    # Every candidate this machine can run was converted, validated and timed.
    runnable = {
        f"{b.name} {p}"
        for b in registry.converters()
        for p in b.precisions
        if registry.support(b.name, p).ok and registry.support(b.name, p).runs_here
    }
    assert {"ort fp32", "ort int8", "openvino fp32", "openvino int8"} <= runnable
    for name in runnable:
        assert rows[name]["verdict"] in (tournament.WINNER, tournament.SLOWER), rows[name]
        assert rows[name]["top1_agreement"] is not None and rows[name]["throughput_per_s"] > 0
        low, high = rows[name]["throughput_per_s_ci95"]  # over the bench's rounds
        assert low <= rows[name]["throughput_per_s"] <= high
    # Within noise of the runner-up: said in the winner's reason and the table, or in neither.
    noisy = table["within_noise_of"]
    assert (noisy is not None) == ("within noise of" in winner["reason"])
    if noisy is not None:
        assert rows[noisy]["verdict"] == tournament.SLOWER
        assert rows[noisy]["throughput_per_s_ci95"][1] >= winner["throughput_per_s_ci95"][0]
    assert "openvino int8 +throughput" in rows  # throughput modes are candidates too
    for row in table["candidates"]:
        assert row["reason"], row
        if row["verdict"] == tournament.SLOWER:
            assert row["throughput_per_s"] <= winner["throughput_per_s"]
            assert row["reason"].startswith("slower: ")
        elif row["verdict"] == tournament.NOT_AVAILABLE:
            assert row["fix"] and row["name"] not in runnable
    assert rows["trt fp32"]["verdict"] == tournament.NOT_AVAILABLE  # no GPU here
    # The output is the winner's artifact, validated, with the table in its manifest.
    manifest = read_manifest(output)
    assert manifest.backend == winner["backend"] and manifest.status == "passed"
    assert manifest.conversion_summary["tournament"] == table
    # The table points at the artifact that exists, not at a discarded scratch copy.
    assert winner["artifact"] == str(output)
    assert all(row["artifact"] is None for row in table["candidates"] if row is not winner)
    throughput = manifest.conversion_summary.get("run_options", {}).get("throughput", False)
    assert throughput == (winner["mode"] == tournament.THROUGHPUT)
    assert not list(tmp_path.glob(".*"))  # no staging left behind
    console = Console(file=io.StringIO(), width=200)
    render_conversion(ConvertResult.from_json(result), console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "winner" in text and "slower: " in text and "not available: " in text


def test_best_writes_nothing_and_exits_4_when_no_candidate_passes(
    digits_saved_model: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "none"
    argv = [
        "convert", str(digits_saved_model), "--backend", "best", "--precision", "fp32",
        "--tolerance", "1e-12,1e-12", "--validate-samples", "100", "--output", str(output),
        "--json",
    ]  # flags beside values # fmt: skip
    code, out, err = run(argv, capfd)
    assert code == 4
    result = json.loads(out)
    verdicts = {row["name"]: row["verdict"] for row in result["tournament"]["candidates"]}
    assert verdicts["ort fp32"] == verdicts["openvino fp32"] == tournament.FAILED_VALIDATION
    assert result["artifact"] is None and not output.exists()
    assert "no candidate passed validation" in err


def test_best_exits_3_before_loading_when_nothing_can_run(
    digits_saved_model: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "convert", str(digits_saved_model), "--backend", "best", "--precision", "tf32",
        "--output", str(tmp_path / "x"), "--json",
    ]  # flags beside values # fmt: skip
    code, out, _ = run(argv, capfd)
    assert code == 3 and not (tmp_path / "x").exists()
    assert json.loads(out)["error"]["message"].startswith("--backend best: nothing can run here")


def test_precision_is_required_unless_best(
    digits_saved_model: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["convert", str(digits_saved_model), "--backend", "ort"], capfd)
    assert code == 2 and "--precision is required unless --backend is best" in err


@pytest.mark.parametrize(
    "settings", [{"batch_size": 0}, {"threads": 0}, {"iterations": 0}, {"duration_s": 0.0}]
)
def test_a_contest_that_cannot_time_anything_is_refused(settings: dict[str, float]) -> None:
    """Refused where the Contest is made, so the API and a release get the CLI's sentence."""
    from trtconv.core.errors import UsageError
    from trtconv.options.convert import Contest

    with pytest.raises(UsageError, match="--rank-batch-size"):
        Contest(**settings)  # type: ignore[arg-type]


@pytest.mark.tensorflow
@KERAS_HUB
def test_best_returns_an_int8_embedding_artifact_judged_by_cosine(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A BERT backbone (keras-hub, tiny): its pooled tanh embedding was judged as class scores
    by its argmax and its sequence output not at all, so no int8 candidate had a verdict and
    best could only return fp32 (with int8 alone, nothing). Judged by cosine, an int8
    candidate passes and wins (without the int8 ladder: whichever passes as it is)."""
    output = tmp_path / "bert-best"
    argv = [
        "convert", str(bert_models() / "backbone"), "--backend", "best", "--precision", "int8",
        "--calib-data", str(bert_tokens_npz()), "--no-fallback", "--rank-duration", "0.1",
        "--output", str(output), "--json",
    ]  # flags beside values # fmt: skip
    code, out, err = run(argv, capfd)
    assert code == 0, err
    result = json.loads(out)
    table = result["tournament"]
    winner = next(row for row in table["candidates"] if row["verdict"] == tournament.WINNER)
    assert result["precision"] == winner["precision"] == "int8"
    validation = result["validation"]
    for name in ("pooled_output", "sequence_output"):
        judged = validation["outputs"][name]
        assert (judged["role"], judged["threshold"], judged["passed"]) == ("embedding", 0.99, True)
    assert winner["top1_agreement"] == validation["top1_agreement"]
    manifest = read_manifest(output)
    assert manifest.status == "passed" and manifest.judging is not None
    assert manifest.judging.roles["sequence_output"].mask == "padding_mask"
