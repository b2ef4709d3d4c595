"""`serve` checks its served path at start: varied warm-up inputs through Triton, answers compared
with the runner in the serve process; a served path that corrupts tensors stops the start."""

from __future__ import annotations

import numpy as np
import pytest

from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.serving.server.batch_runner import sample_feeds
from trtconv.serving.server.start_check import Expected, difference, request_sizes

SIGNATURE = ModelSignature(
    inputs=(
        TensorSpec("image", (None, 4, 4), "float32"),
        TensorSpec("ids", (None, 6), "int32"),
        TensorSpec("mask", (None, 6), "bool"),
    ),
    outputs=(TensorSpec("scores", (None, 10), "float32"), TensorSpec("label", (None,), "int64")),
)


def expected() -> Expected:
    rng = np.random.default_rng(3)
    scores = rng.random((2, 10)).astype(np.float32) * 100
    return Expected(sample_feeds(SIGNATURE, 2, True), {"scores": scores, "label": np.arange(2)})


def test_every_element_of_a_checked_input_is_drawn_on_its_own() -> None:
    """A corruption that repeats an input's first element must change the inputs themselves."""
    feeds = sample_feeds(SIGNATURE, 2, True, seed=1)
    assert feeds["image"].dtype == np.float32 and len(np.unique(feeds["image"])) == 32
    assert set(np.unique(feeds["ids"])) == {0, 1} and feeds["ids"].dtype == np.int32
    assert set(np.unique(feeds["mask"])) == {False, True}
    again = sample_feeds(SIGNATURE, 2, True, seed=2)
    assert not np.array_equal(feeds["image"], again["image"])
    assert request_sizes(8, True) == [1, 2, 1] and request_sizes(1, True) == [1, 1, 1]
    assert request_sizes(4, False) == [4, 4, 4]


def test_the_same_runners_rounding_passes_and_a_corrupted_answer_is_named() -> None:
    want = expected()
    scores = want.outputs["scores"]
    rounding = {"scores": scores * np.float32(1 + 2e-6), "label": np.arange(2)}
    assert difference(SIGNATURE, want, rounding) == ""
    nan = {**want.outputs, "scores": scores.copy()}
    nan["scores"][0, 0] = np.nan
    assert difference(SIGNATURE, Expected(want.feeds, nan), nan) == ""  # NaN where the model has it

    repeated = {"scores": np.full_like(scores, scores.flat[0]), "label": np.arange(2)}
    said = difference(SIGNATURE, want, repeated)
    assert said.startswith("output 'scores' has 19 of 20 elements outside float32's tolerance")
    assert "atol 0.0001, rtol 1e-05" in said
    assert difference(SIGNATURE, want, {"scores": scores, "label": np.array([0, 0])}) == (
        "output 'label' differs in 1 of 2 elements"
    )
    empty = {"scores": np.zeros((0,), np.float32), "label": np.arange(2)}
    assert difference(SIGNATURE, want, empty) == (
        "output 'scores' came back with shape [0] where the model gives [2, 10]"
    )
    assert difference(SIGNATURE, want, {"label": np.arange(2)}) == "output 'scores' is missing"


@pytest.mark.slow
@pytest.mark.tensorflow
def test_serving_through_as_numpy_is_stopped_under_numpy_2_and_serves_under_numpy_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The served path of before (inputs read by the backend's `as_numpy()`), on a real Triton:
    under NumPy 2 every input element equals the first, silently; the start check sees the
    answers differ and stops the start (exit 1, one sentence, nothing served). Under NumPy 1 the
    same path is right, and the check lets it serve."""
    from tests.helpers import as_numpy_model
    from tests.helpers.serving_fixtures import artifact, pytriton_or_skip
    from trtconv.cli import main
    from trtconv.serving.server import triton_process

    pytriton_or_skip()
    model = artifact("ort", "int8")

    monkeypatch.setattr(triton_process, "MODEL_PY", as_numpy_model.model_py("AsNumpyInputs"))
    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(model), "--name", "digits", "--stop-after", "0.2", "--instances", "1"])
    err = capsys.readouterr().err
    if int(np.__version__.split(".")[0]) >= 2:
        assert stopped.value.code == 1, err
        lines = [line for line in err.splitlines() if "does not answer" in line]
        assert len(lines) == 1, err
        assert (
            "warm-up request 1 (1 sample(s) of varied inputs, sent through Triton): " in (lines[0])
        )
        assert "output 'probabilities' has " in lines[0] and "nothing was served" in lines[0]
        assert "serving digits at" not in err
    else:
        assert stopped.value.code == 0, err
        assert "serving digits at" in err
