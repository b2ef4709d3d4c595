"""bench's agreement with the baseline is judged as validate judges it: per-token class scores
over the tokens the padding mask marks, an embedding by the share of samples whose cosine
reaches its bound."""

from __future__ import annotations

import numpy as np
import pytest

from trtconv.bench.accuracy import AccuracySet, judge_models
from trtconv.calib.sources import ArraySet
from trtconv.core.data_contract import DataContract
from trtconv.core.judging_options import Judging
from trtconv.measure.bench_result import ModelInfo


def _info(label: str, precision: str, baseline: bool = False) -> ModelInfo:
    kind = "saved_model" if baseline else "artifact"
    return ModelInfo(
        label=label,
        model=label,
        backend="ort",
        precision=precision,
        xla=False,
        kind=kind,
        is_baseline=baseline,
    )


def test_bench_agreement_counts_valid_tokens_and_cosines() -> None:
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(60, 5, 7)).astype(np.float32)
    mask = np.ones((60, 5), np.int32)
    mask[30:, 3:] = 0
    served = logits.copy()
    served[mask == 0] = np.roll(logits[mask == 0], 1, axis=-1)  # wrong on every padded token
    served[0, 0] = np.roll(logits[0, 0], 1)  # and on one valid token
    pooled = rng.normal(size=(60, 24)).astype(np.float32)
    feeds = {"token_ids": np.ones((60, 5), np.int32), "padding_mask": mask}
    judging = Judging.build({"logits": "class_map", "pooled": "embedding"})
    evaluation = AccuracySet(ArraySet(feeds, None, "tokens"), DataContract(), judging)
    baseline, artifact = _info("native", "fp32", True), _info("int8", "int8")
    outputs = {
        "native": {"logits": logits, "pooled": pooled},
        "int8": {"logits": served, "pooled": pooled * 1.5},  # the same directions
    }
    judge_models([baseline, artifact], baseline, outputs, evaluation, None)
    # the class map's: one valid token of 270 wrong, in a sample of 5 valid tokens
    assert artifact.top1_agreement == pytest.approx((59 + 4 / 5) / 60)
    assert artifact.eval_samples == 60 and baseline.top1_agreement == 1.0
    outputs["int8"]["pooled"] = -pooled  # every sample turned around
    judge_models([artifact], baseline, outputs, evaluation, None)
    assert artifact.top1_agreement == 0.0  # the lowest agreement: the embedding's
