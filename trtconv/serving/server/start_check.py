"""`serve` checks its own served path before it says it serves: the warm-up requests it sends
through Triton carry varied inputs (every element drawn on its own), and each answer must be
what the runner computes on the same inputs in the `serve` process. A served path that moves
tensors wrongly (Triton 2.51's `as_numpy()` under NumPy 2 gave every element of an input equal
to the first, silently; its `pb_utils.Tensor` sent 0-byte outputs) stops the start with one
sentence, instead of serving wrong numbers: a warm-up of one value repeated would not see it.

The same runner on the same inputs differs only by the arithmetic of its thread count and batch:
the answers are compared with float32's tolerance (the table's `fp32` atol and rtol, whatever
the artifact's precision); integers, booleans and strings must be equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from trtconv.core.model_io import STRING, Feeds, ModelSignature
from trtconv.core.numbers import human
from trtconv.core.precision import Precision
from trtconv.outputs.contract import resolve
from trtconv.outputs.tolerance import within_elements
from trtconv.serving.repository.fixed_inputs import ServedModel
from trtconv.serving.server.batch_runner import as_declared, sample_feeds

CHECKED_REQUESTS = 3  # distinct inputs, sent in turn by the served warm-up
SAME_RUNNER = resolve(Precision.FP32).tolerance


@dataclass(frozen=True)
class Expected:
    """One warm-up request: its inputs and what the runner in `serve` answers them with."""

    feeds: Feeds
    outputs: dict[str, np.ndarray]

    @property
    def samples(self) -> int:
        first = next(iter(self.feeds.values()), None)
        return len(first) if first is not None and first.ndim else 1


def request_sizes(largest: int, batched: bool) -> list[int]:
    """The batch of each checked request: 1, then 2 where the batcher takes it (a request of
    several samples is split back by the served path), then 1; a fixed-batch model's batch."""
    if not batched:
        return [largest] * CHECKED_REQUESTS
    return [1, min(2, largest), 1][:CHECKED_REQUESTS]


def expected_answers(model: ServedModel, largest: int, batched: bool) -> tuple[Expected, ...]:
    """The checked requests' inputs (a seed each) and the runner's answers to them, in the
    dtypes Triton declares."""
    signature = model.signature
    expected = []
    for seed, size in enumerate(request_sizes(largest, batched), start=1):
        feeds = sample_feeds(signature, size, batched, seed=seed)
        outputs = model.infer(feeds)
        expected.append(
            Expected(feeds, {o.name: as_declared(outputs[o.name], o) for o in signature.outputs})
        )
    return tuple(expected)


def difference(signature: ModelSignature, want: Expected, got: Mapping[str, np.ndarray]) -> str:
    """What the served answer `got` does differently from `want` ("" when nothing does): the
    first output whose shape, or whose values, are not the runner's."""
    for spec in signature.outputs:
        expected, served = want.outputs[spec.name], got.get(spec.name)
        if served is None:
            return f"output '{spec.name}' is missing"
        if served.shape != expected.shape:
            return (
                f"output '{spec.name}' came back with shape {list(served.shape)} where the model "
                f"gives {list(expected.shape)}"
            )
        if spec.dtype == STRING or expected.dtype.kind in "iubSO":
            wrong = int(np.count_nonzero(served != expected))
            if wrong:
                return f"output '{spec.name}' differs in {wrong} of {expected.size} elements"
            continue
        both_nan = np.isnan(expected) & np.isnan(served)
        outside = ~(within_elements(expected, served, SAME_RUNNER.atol or 0.0, SAME_RUNNER.rtol))
        outside &= ~both_nan
        if outside.any():
            error = np.abs(served.astype(np.float64) - expected.astype(np.float64))[outside]
            return (
                f"output '{spec.name}' has {int(outside.sum())} of {expected.size} elements "
                f"outside float32's tolerance (atol {SAME_RUNNER.atol}, rtol "
                f"{SAME_RUNNER.rtol}), largest error {human(float(np.nanmax(error)))}"
            )
    return ""


def mismatch_sentence(which: int, want: Expected, what: str) -> str:
    """The one sentence that stops the start."""
    return (
        f"the served path does not answer what the model computes: warm-up request {which} "
        f"({want.samples} sample(s) of varied inputs, sent through Triton): {what}, against the "
        f"same runner in this process (NumPy {np.__version__}); nothing was served"
    )
