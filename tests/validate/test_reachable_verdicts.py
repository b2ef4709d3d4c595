"""Verdicts the user's data can reach: every sample given is used for what it can
serve, a validation source apart from calibration, fp32 judged by its values, and `validate`
never judging on a sample a conversion was fitted to. On a small MLP built here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.convert_fixtures import work_dir
from tests.helpers.features_fixtures import features, mlp
from trtconv import api
from trtconv.artifact.manifest import read_manifest
from trtconv.core.data_contract import Purpose
from trtconv.core.errors import AccuracyError, GateError
from trtconv.core.judging_options import ToleranceOptions
from trtconv.options.convert import Contest, ConvertOptions
from trtconv.options.validate import ValidateOptions
from trtconv.outputs.confidence import proportion_interval, samples_to_show
from trtconv.validate.pipeline import ValidateResult

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # trains and converts real models


def npz(samples: int, seed: int) -> Path:
    """`samples` feature samples as an .npz (x, y)."""
    path = work_dir() / f"features-{samples}-{seed}.npz"
    if not path.exists():
        data = features(samples, seed)
        np.savez(path, x=data.x, y=data.labels)
    return path


def convert(tmp_path: Path, precision: str, data: Path, **options: object) -> dict:
    """convert's result document, also when validation did not pass."""
    output = tmp_path / f"mlp-{precision}"
    try:
        result = api.convert(
            ConvertOptions(
                mlp(), precision, backend="ort", output=output, calib_data=str(data), **options
            )  # type: ignore[arg-type]
        )
        return result.to_json()
    except AccuracyError as exc:
        return exc.result.to_json()  # type: ignore[union-attr]


def purposes(artifact: Path) -> dict[str, Purpose]:
    contract = read_manifest(artifact).data_contract
    assert contract is not None and contract.purposes is not None
    return {entry.purpose: entry for entry in contract.purposes}


def test_int8_on_300_samples_reaches_a_verdict_on_every_unfitted_sample(tmp_path: Path) -> None:
    """Before: a fixed 20% held out (60 samples): 60/60 agreeing was inconclusive. Now the
    first 128 calibrate, the other 172 validate, and the verdict is the one the agreement
    measured outside trtconv on all of them gives; `validate` judges on the same 172."""
    result = convert(tmp_path, "int8", npz(300, seed=2))
    validation, artifact = result["validation"], Path(result["artifact"])
    used = purposes(artifact)
    assert used["calibration"].samples == 128 and used["calibration"].start == 0
    assert used["validation"].start == 128 and used["validation"].samples == 172
    assert validation["samples"] == 172
    assert (samples_to_show(0.97, 0.95) or 0) <= 172  # 172 samples can decide int8's budget
    agreeing = round(validation["top1_agreement"] * 172)
    low, high = proportion_interval(agreeing, 172, 0.95) or (0.0, 1.0)
    expected = "passed" if low >= 0.97 else "failed" if high < 0.97 else "inconclusive"
    assert validation["verdict"] == expected

    try:
        checked = api.validate(ValidateOptions(artifact))
    except AccuracyError as undecided:  # the verdict is this CPU's int8 accuracy's business
        assert isinstance(undecided.result, ValidateResult)
        checked = undecided.result
    assert checked.verdict == expected and checked.samples == 172
    assert checked.data_contract.fitted_samples_excluded == 128
    assert checked.data_contract.split == "all"


def test_a_separate_validation_source_is_used_whole(tmp_path: Path) -> None:
    """--validate-data: calibration takes the 300-sample source, validation all 600 of its
    own (a reported 800 + a separate 600, scaled down); --validate-samples still caps it."""
    result = convert(
        tmp_path, "int8", npz(300, seed=2), validate_data=str(npz(600, seed=3)), fallback=False
    )
    used = purposes(Path(result["artifact"]))
    assert result["validation"]["samples"] == 600
    assert used["validation"].source == str(npz(600, seed=3))
    assert used["calibration"].samples == 288  # whole batches of 32 of the 300
    assert result["validation"]["verdict"] in ("passed", "failed")

    capped = convert(
        tmp_path / "capped",
        "int8",
        npz(300, seed=2),
        fallback=False,
        validate_data=str(npz(600, seed=3)),
        validate_samples=50,
        confidence=0.0,
    )
    assert capped["validation"]["samples"] == 50
    assert capped["validation"]["confidence"] == 0.0  # point decisions keep their meaning


def test_fp32_passes_on_values_and_a_perturbed_output_fails(tmp_path: Path) -> None:
    """Before: fp32 on 100 samples agreeing 100/100 was inconclusive against 0.99 (381 needed).
    Now every element within 1e-4 on all 100 decides: passed. The same artifact with its
    probabilities moved by 1e-3 fails validate by their values when given a tolerance; by
    default a decision output past fp32's tolerance is judged by its decisions, as at fp16
    (float32 may not be reproduced), which 100 agreeing samples cannot show at 0.98."""
    result = convert(tmp_path, "fp32", npz(100, seed=4))
    validation = result["validation"]
    assert validation["samples"] == 100 and validation["verdict"] == "passed"
    rates = [c for c in validation["checks"] if "top-1 agreement" in c["name"]]
    assert rates and not rates[0]["gating"] and "decided by its values" in rates[0]["detail"]
    assert any(c["name"].endswith("margins") for c in validation["checks"])

    artifact = Path(result["artifact"])
    perturb(artifact / "model.onnx", 1e-3)
    stated = ToleranceOptions(atols={"probabilities": 1e-4})
    with pytest.raises(AccuracyError) as raised:
        api.validate(ValidateOptions(artifact, tolerance=stated))
    assert raised.value.result.verdict == "failed"  # type: ignore[union-attr]
    with pytest.raises(AccuracyError) as raised:
        api.validate(ValidateOptions(artifact))
    report = raised.value.result
    assert report.verdict == "inconclusive"  # type: ignore[union-attr]
    assert report.outputs["probabilities"].values_not_reproduced  # type: ignore[union-attr]


def perturb(path: Path, amount: float) -> None:
    """Add `amount` to the ONNX model's first output (a real defect, past fp32's 1e-4)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    output = model.graph.output[0].name
    inner = output + "_before"
    for node in model.graph.node:
        node.output[:] = [inner if name == output else name for name in node.output]
    shift = numpy_helper.from_array(np.array(amount, np.float32), "perturbation")
    model.graph.initializer.append(shift)
    model.graph.node.append(helper.make_node("Add", [inner, "perturbation"], [output]))
    onnx.save(model, path)


def test_a_7_sample_source_stays_inconclusive(tmp_path: Path) -> None:
    """7 samples decide nothing: int8 (3 calibrate, 4 validate) and fp32 (7 within tolerance
    are not the 59 that show fewer than 5% of inputs exceed it) are both inconclusive."""
    data = npz(7, seed=5)
    int8 = convert(tmp_path, "int8", data, fallback=False)
    assert int8["validation"]["verdict"] == "inconclusive"
    assert int8["validation"]["samples"] == 4
    fp32 = convert(tmp_path, "fp32", data)
    assert fp32["validation"]["verdict"] == "inconclusive"
    values = next(c for c in fp32["validation"]["checks"] if c["name"].endswith("values"))
    assert values["inconclusive"] and "59 would show" in values["detail"]


def test_a_release_with_256_calibration_and_397_eval_samples_reaches_a_verdict(
    tmp_path: Path,
) -> None:
    """A reported release (256 calibration + 397 labelled eval samples, gates top-1 >= 0.9 and
    speedup >= 0.5). Before: the eval file was split again (n=80), fp32's validation_passed was
    inconclusive on a calibration hold-out, and the reason blamed the bench's rounds. Now [eval]
    counts whole for eval and for every conversion's validation, fp32 by its values."""
    config = tmp_path / "release.toml"
    config.write_text(
        f'[model]\npath = "{mlp()}"\n'
        '[[targets]]\nbackend = "ort"\nprecision = "int8"\n'
        '[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'
        f'[calibration]\ndata = "{npz(256, seed=7)}"\nfallback = false\n'
        f'[eval]\ndata = "{npz(397, seed=8)}"\n'
        "[bench]\nbatch_sizes = [8]\niterations = 20\nwarmup = 2\n"
        "[gates]\nmin_top1_agreement = 0.9\nmin_speedup = 0.5\ngate_batch_size = 8\n"
    )
    try:
        document = api.release(api.ReleaseOptions(config, tmp_path / "out")).to_json()
    except GateError as exc:
        document = exc.result.to_json()  # type: ignore[union-attr]
    assert document["verdict"] in ("passed", "failed")
    for entry in document["targets"]:
        assert entry["eval"]["samples"] == 397 and entry["eval"]["data_contract"]["split"] == "all"
        assert entry["validation"]["samples"] == 397  # the conversion validated on [eval] too
        gates = {g["name"]: g for g in entry["gates"]}
        assert gates["validation_passed"]["verdict"] != "inconclusive"
    fp32 = next(e for e in document["targets"] if e["precision"] == "fp32")
    assert {g["name"]: g["verdict"] for g in fp32["gates"]}["validation_passed"] == "passed"
    assert "bench added rounds" not in (document["recommendation_reason"] or "")


def test_best_on_800_samples_crowns_a_winner_and_on_7_keeps_inconclusive_apart(
    tmp_path: Path,
) -> None:
    """Reported: `--backend best` with 800 samples ended 'no candidate passed validation', fp32
    candidates agreeing 160/160 'failed validation: ... inconclusive'. Now fp32 candidates
    validate on all 800 by their values and one wins; on 7 samples nothing is decided, and the
    candidates are 'inconclusive validation', not failed, with the data that would decide it."""
    contest = Contest(batch_size=8, duration_s=0.5)
    options = {"backend": "best", "contest": contest, "calib_data": str(npz(800, seed=9))}
    won = api.convert(ConvertOptions(mlp(), "fp32", output=tmp_path / "won", **options))
    assert won.validation is not None and won.validation.samples == 800
    assert won.tournament and won.tournament.winner

    options["calib_data"] = str(npz(7, seed=5))
    with pytest.raises(AccuracyError, match="some are inconclusive") as raised:
        api.convert(ConvertOptions(mlp(), "fp32", output=tmp_path / "none", **options))
    table = raised.value.result.tournament  # type: ignore[union-attr]
    verdicts = {row.verdict for row in table.candidates if row.verdict != "not available"}
    assert verdicts == {"inconclusive validation"}
    reasons = " ".join(row.reason for row in table.candidates)
    assert "about 59 samples would decide it" in reasons and "--validate-data" in reasons
