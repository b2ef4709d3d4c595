"""How int8 (and fp16's keep-float32 ranges) agreement changes with the number of samples fitted:
the measurement behind SHARED_CALIB_SAMPLES and FP16_RANGE_SAMPLES (docs/int8.md, docs/fp16.md).

Each model is converted with `ort` (no precision ladder) calibrated on N samples of its
calibration source and validated on one fixed source it never trained on, so only N changes:

    PYTHONPATH=$PWD python examples/calibration_samples.py [OUT.json [MODEL ...]]

Models: trtconv's digits CNN (calibration: digits' train split, validation: its 450 test
samples), the tests' small ResNet on 16x16 digits (its 1,437 training samples / 360 held out),
the tests' 16-feature MLP (2,000 / 1,000 fresh samples) and the tests' outlier model (digits with
a dense layer whose activations have outliers, where min-max ranges depend on the samples seen).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from tests.helpers.convert_fixtures import digits_rgb16, small_resnet
from tests.helpers.features_fixtures import features, mlp
from tests.helpers.precision_fixtures import outlier_model
from trtconv import api
from trtconv.calib.sources import ArraySet, split_holdout
from trtconv.core.errors import AccuracyError

SIZES = (32, 64, 128, 256, 512, 1000)
FP16_SIZES = (8, 32, 64, 256)


def save(data: ArraySet, path: Path) -> str:
    np.savez(path, x=data.x, y=data.labels)
    return str(path)


def agreement(saved_model: Path, precision: str, calib: str, val: str | None, n: int) -> dict:
    """The validation figures of one conversion calibrated on `n` samples."""
    with tempfile.TemporaryDirectory() as tmp:
        options = api.ConvertOptions(
            saved_model,
            precision,
            backend="ort",
            output=Path(tmp) / "a",
            calib_data=calib,
            calib_samples=n,
            fallback=False,
            validate_data=val,
        )
        try:
            result = api.convert(options).to_json()
        except AccuracyError as exc:
            result = exc.result.to_json()  # type: ignore[union-attr]
    validation = result["validation"]
    calibrated = (result["manifest"].get("calibration") or {}).get("samples")
    return {
        "samples_fitted": calibrated if calibrated is not None else n,
        "validated_on": validation["samples"],
        "top1_agreement": validation["top1_agreement"],
        "top1_agreement_ci95": validation["top1_agreement_ci95"],
        "verdict": validation["verdict"],
    }


def main(out: Path, chosen: list[str]) -> None:
    work = Path(tempfile.mkdtemp())
    digits = work / "digits"
    if not chosen or "digits-cnn" in chosen:
        api.train(api.TrainOptions(model="digits-cnn", output=digits, epochs=12))
    train16, held16 = split_holdout(digits_rgb16())
    models = {
        "digits-cnn": (digits / "saved_model", "digits", None),
        "outlier": (outlier_model(), "digits", None),
        "small-resnet": (
            small_resnet(),
            save(train16, work / "r-train.npz"),
            save(held16, work / "r-val.npz"),
        ),
        "mlp16": (
            mlp(),
            save(features(2000, 1), work / "m-train.npz"),
            save(features(1000, 6), work / "m-val.npz"),
        ),
    }
    rows = []
    for name, (model, calib, val) in models.items():
        if chosen and name not in chosen:
            continue
        for n in SIZES:
            rows.append(
                {
                    "model": name,
                    "precision": "int8",
                    "requested": n,
                    **agreement(model, "int8", calib, val, n),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    model, calib, val = models["small-resnet"]
    for n in FP16_SIZES if not chosen or "fp16" in chosen else ():
        rows.append(
            {
                "model": "small-resnet",
                "precision": "fp16",
                "requested": n,
                **agreement(model, "fp16", calib, val, n),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "calibration_samples.json"), sys.argv[2:])
