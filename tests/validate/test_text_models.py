"""Text models as they come (keras-hub's GPT-2, a BERT tagger and its backbone, exported with
`model.export`, half of every batch padded): per-token class scores judged as decisions per
token over the tokens the padding mask marks, embeddings by cosine, each verdict the one a count
made here with numpy gives, and no word of pixels for token ids."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.text_fixtures import (
    KERAS_HUB,
    SAMPLES,
    bert_models,
    bert_tokens_npz,
    gpt2_model,
    gpt2_tokens_npz,
)
from trtconv import api
from trtconv.artifact.manifest import read_manifest
from trtconv.backends import registry
from trtconv.calib.sources import ArraySet
from trtconv.cli import main
from trtconv.core.errors import AccuracyError
from trtconv.core.judging_options import Judging
from trtconv.options.convert import ConvertOptions
from trtconv.options.validate import ValidateOptions
from trtconv.outputs.compare import run_batched
from trtconv.outputs.tolerance import TOLERANCES
from trtconv.protocol.runner import RunOptions
from trtconv.validate.pipeline import ValidateResult

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow, KERAS_HUB]  # trains and converts

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def _outputs(model: Path, data: Path) -> dict[str, np.ndarray]:
    """The outputs of `model` (a SavedModel or an artifact) on `data`, run by trtconv's runner
    as validate runs it (batches of 32): what the counts here are made of."""
    with registry.open_runner(model, RunOptions()) as runner:
        return run_batched(runner, ArraySet(_feeds(data), None, str(data)))


def _feeds(data: Path) -> dict[str, np.ndarray]:
    with np.load(data) as archive:
        return {name: archive[name] for name in archive.files if name != "y"}


def _wilson(mean: float, samples: int) -> tuple[float, float]:
    """The Wilson interval of a mean of per-sample shares (as for k of n)."""
    z2 = Z95 * Z95
    centre = (mean + z2 / (2 * samples)) / (1 + z2 / samples)
    half = Z95 / (1 + z2 / samples) * math.sqrt(mean * (1 - mean) / samples + z2 / (4 * samples**2))
    return centre - half, centre + half


def _token_agreement(want: np.ndarray, got: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per sample, the share of its valid tokens whose top-1 class agrees (numpy alone)."""
    agree = want.argmax(-1) == got.argmax(-1)
    return np.array([agree[row][valid[row]].mean() for row in range(len(agree))])


def _convert(model: Path, precision: str, data: Path, output: Path, **options: object) -> Path:
    """`model` converted with ONNX Runtime at `precision`, calibrated on `data`, without the int8
    ladder (what is under test is the verdict, whichever it is)."""
    with contextlib.suppress(AccuracyError):  # written, its verdict in its manifest
        api.convert(
            ConvertOptions(
                model,
                precision,
                backend="ort",
                output=output,
                calib_data=str(data),
                fallback=False,
                **options,  # type: ignore[arg-type]
            )
        )
    return output


def _validate(options: ValidateOptions) -> ValidateResult:
    """validate's result, passed or not."""
    try:
        return api.validate(options)
    except AccuracyError as failed:
        assert isinstance(failed.result, ValidateResult)
        return failed.result


def _verdict(rates: list[np.ndarray], minimum: float) -> str:
    """The verdict of per-sample rates (each a mean of per-sample values in [0, 1]) against
    `minimum`, decided here on their Wilson intervals: failed when one lies wholly below,
    passed when every one clears it, else inconclusive."""
    intervals = [_wilson(rate.mean(), len(rate)) for rate in rates]
    if any(high < minimum for _, high in intervals):
        return "failed"
    return "passed" if all(low >= minimum for low, _ in intervals) else "inconclusive"


HELD_OUT = 2  # the seed of the tokens validated on (0 calibrates, 1 trained)


@pytest.fixture(scope="module")
def gpt2_artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """GPT-2 converted to ONNX Runtime int8 and fp16, calibrated on other tokens than those
    validated on."""
    root = tmp_path_factory.mktemp("gpt2")
    return {
        precision: _convert(gpt2_model(), precision, gpt2_tokens_npz(), root / precision)
        for precision in ("int8", "fp16")
    }


def test_a_language_models_logits_are_judged_per_token_over_valid_tokens(
    gpt2_artifacts: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """GPT-2's logits [batch, 16, 256]: class_map inferred (token inputs, 256 classes over a
    hidden size of 32) with padding_mask found as its mask. Before: a plain tensor, "not
    judged" at int8, and with --output-role class_map every padded position counted."""
    model, held_out = gpt2_model(), gpt2_tokens_npz(HELD_OUT)
    feeds = _feeds(held_out)
    valid = feeds["padding_mask"] != 0
    native = _outputs(model, held_out)["output_0"]
    for precision, minimum in (("int8", 0.97), ("fp16", 0.98)):
        artifact = gpt2_artifacts[precision]
        judging = read_manifest(artifact).judging
        assert judging is not None
        role = judging.roles["output_0"]
        assert (role.role, role.mask) == ("class_map", "padding_mask"), role
        assert "256 classes over a hidden size of 32" in role.source
        result = _validate(ValidateOptions(artifact, data=str(held_out), samples=SAMPLES))
        got = _outputs(artifact, held_out)["output_0"]
        shares = _token_agreement(native, got, valid)
        output = result.outputs["output_0"]
        assert output.agreement == pytest.approx(shares.mean(), abs=1e-9)
        assert 0.95 < output.agreement < 1.0  # some tokens changed: the count is not all ones
        assert result.verdict == _verdict([shares], minimum), result.failures()
    # Token ids get no pixel words.
    capsys.readouterr()
    assert _cli(
        [
            "validate",
            str(gpt2_artifacts["fp16"]),
            "--data",
            str(held_out),
            "--samples",
            "64",
            "--confidence",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert "inputs fed as given (no input is an image)" in out and "pixels" not in out


def _cli(argv: list[str]) -> bool:
    """Run the CLI in-process; True when it exited 0."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    return int(stopped.value.code or 0) == 0


def test_padded_positions_do_not_move_the_verdict(gpt2_artifacts: dict[str, Path]) -> None:
    """The same tokens validated twice, their padding 0 and then random ids: the model's
    outputs at padded positions change, its verdict and every figure do not. Counting every
    position instead (mask=none) moves the figure."""
    model, artifact = gpt2_model(), gpt2_artifacts["int8"]
    zeros, garbage = gpt2_tokens_npz(HELD_OUT, "pad"), gpt2_tokens_npz(HELD_OUT, "garbage")
    padded = _feeds(zeros)["padding_mask"] == 0
    moved = _outputs(model, zeros)["output_0"] - _outputs(model, garbage)["output_0"]
    assert np.abs(moved[padded]).max() > 0.1 and np.abs(moved[~padded]).max() < 1e-4
    results = [
        api.validate(ValidateOptions(artifact, data=str(data), samples=SAMPLES)).to_json()
        for data in (zeros, garbage)
    ]
    first, second = (result["outputs"]["output_0"] for result in results)
    for figure in ("agreement", "agreement_ci95", "max_abs_error", "within"):
        assert first[figure] == second[figure], figure
    assert results[0]["verdict"] == results[1]["verdict"] == "passed"
    whole = api.validate(
        ValidateOptions(
            artifact,
            data=str(garbage),
            samples=SAMPLES,
            judging=Judging.build({"output_0": "class_map:mask=none"}),
        )
    )
    # every position counted instead: the padding's own (dis)agreements move the figure
    assert whole.outputs["output_0"].agreement != first["agreement"]


def test_a_token_tagger_is_judged_per_token_with_its_accuracy_over_valid_tokens(
    tmp_path: Path,
) -> None:
    """The tagger's [batch, 16, 5] logits say nothing of being class scores (5 tags below a
    hidden size of 32): not judged at int8, the reason naming class_map for its shape; with
    --output-role output_0=class_map, judged per token, labels scored on valid tokens."""
    model, held_out = bert_models() / "tagger", bert_tokens_npz(HELD_OUT)
    feeds = _feeds(held_out)
    valid = feeds["padding_mask"] != 0
    truth = np.load(held_out)["y"]
    native = _outputs(model, held_out)["output_0"]
    correct = native.argmax(-1) == truth
    accuracy = np.array([correct[row][valid[row]].mean() for row in range(len(valid))])
    for precision in ("int8", "fp16"):
        artifact = _convert(
            model, precision, bert_tokens_npz(), tmp_path / f"tagger-{precision}",
            judging=Judging.build({"output_0": "class_map"}),
        )  # fmt: skip
        result = _validate(ValidateOptions(artifact, data=str(held_out), samples=SAMPLES))
        shares = _token_agreement(native, _outputs(artifact, held_out)["output_0"], valid)
        output = result.outputs["output_0"]
        assert output.role == "class_map" and result.labels_output == "output_0"
        assert output.agreement == pytest.approx(shares.mean(), abs=1e-9)
        assert result.accuracy_reference == pytest.approx(accuracy.mean(), abs=1e-9)
        assert result.verdict == _verdict([shares], TOLERANCES[precision].min_top1_agreement)
    unjudged = api.validate(
        ValidateOptions(
            tmp_path / "tagger-int8",
            data=str(held_out),
            samples=SAMPLES,
            judging=Judging.build({"output_0": "tensor"}, allow_unjudged=True),
        )
    )
    reason = next(c.detail for c in unjudged.checks if c.name == "output_0 not judged")
    assert "--output-role output_0=class_map if its [batch, 16, 5] holds 5 class scores" in reason


def test_a_bert_backbones_outputs_get_cosine_verdicts_that_match_numpy(tmp_path: Path) -> None:
    """pooled_output [batch, 32] (a tanh embedding; before: class scores judged by their
    argmax) and sequence_output [batch, 16, 32] (before: not judged): embeddings judged per
    sample by cosine, the sequence per valid token, the bound recorded in the manifest: full
    int8 (no ladder) has the verdict numpy's count gives, whatever it is."""
    model, held_out = bert_models() / "backbone", bert_tokens_npz(HELD_OUT)
    artifact = _convert(model, "int8", bert_tokens_npz(), tmp_path / "bert-int8")
    manifest = read_manifest(artifact)
    assert manifest.judging is not None
    roles = manifest.judging.roles
    assert {name: (r.role, r.threshold, r.mask) for name, r in roles.items()} == {
        "pooled_output": ("embedding", 0.99, None),
        "sequence_output": ("embedding", 0.99, "padding_mask"),
    }
    result = _validate(ValidateOptions(artifact, data=str(held_out), samples=SAMPLES))
    feeds = _feeds(held_out)
    want, got = _outputs(model, held_out), _outputs(artifact, held_out)
    pooled = _cosine(want["pooled_output"], got["pooled_output"]) >= 0.99
    tokens = _cosine(want["sequence_output"], got["sequence_output"]) >= 0.99
    valid = feeds["padding_mask"] != 0
    per_sample = np.array([tokens[i][valid[i]].mean() >= 0.95 for i in range(len(valid))])
    assert result.outputs["pooled_output"].agreement == pytest.approx(pooled.mean())
    assert result.outputs["sequence_output"].agreement == pytest.approx(per_sample.mean())
    assert result.verdict == _verdict([pooled, per_sample], 0.97)
    assert result.top1_agreement == min(pooled.mean(), per_sample.mean())


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 * b64).sum(-1) / (np.linalg.norm(a64, axis=-1) * np.linalg.norm(b64, axis=-1))
