"""Reading a SavedModel signature from saved_model.pb without TensorFlow, checked against TF."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtconv.core.errors import InputError, UsageError
from trtconv.model.savedmodel_pb.signature import read_signature


@pytest.fixture(scope="module")
def two_input_saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SavedModel with a float32 [?, 3, 5] and an int64 [2, ?] input and two outputs."""
    import tensorflow as tf

    class Model(tf.Module):
        @tf.function(
            input_signature=[
                tf.TensorSpec([None, 3, 5], tf.float32, name="pixels"),
                tf.TensorSpec([2, None], tf.int64, name="ids"),
            ]
        )
        def serve(self, pixels: tf.Tensor, ids: tf.Tensor) -> dict[str, tf.Tensor]:
            return {
                "sum": tf.reduce_sum(pixels, axis=[1, 2]),
                "mask": tf.cast(ids > 0, tf.bool),
            }

    path = tmp_path_factory.mktemp("sig") / "saved_model"
    model = Model()
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.serve})
    return path


@pytest.mark.slow
@pytest.mark.tensorflow
def test_matches_tensorflow(two_input_saved_model: Path) -> None:
    from trtconv.model.savedmodel import load_saved_model

    expected = load_saved_model(two_input_saved_model).signature
    found = read_signature(two_input_saved_model)
    assert found.inputs == expected.inputs
    assert found.outputs == expected.outputs
    assert [s.describe() for s in found.inputs] == ["ids: int64[2,?]", "pixels: float32[?,3,5]"]


@pytest.mark.slow
@pytest.mark.tensorflow
def test_missing_signature_names_what_exists(two_input_saved_model: Path) -> None:
    with pytest.raises(UsageError, match=r"no 'predict' signature \(found: serving_default\)"):
        read_signature(two_input_saved_model, key="predict")


def test_corrupt_file_is_one_input_error(tmp_path: Path) -> None:
    (tmp_path / "saved_model.pb").write_bytes(b"\x12\xff\xff\xff\xff\x0fnot a protobuf")
    with pytest.raises(InputError, match="could not be read"):
        read_signature(tmp_path)


@pytest.fixture(scope="module")
def unknown_rank_saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SavedModel whose input is declared `tf.TensorSpec(None)`: no rank at all."""
    import tensorflow as tf

    class Model(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(None, tf.float32, name="anything")])
        def serve(self, anything: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"total": tf.reduce_sum(anything)}

    path = tmp_path_factory.mktemp("rank") / "saved_model"
    model = Model()
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.serve})
    return path


@pytest.mark.slow
@pytest.mark.tensorflow
def test_unknown_rank_is_refused_in_one_sentence_by_both_readers(
    unknown_rank_saved_model: Path,
) -> None:
    """Before: the pb reader took it for a scalar and TensorFlow's reader crashed (as_list)."""
    from trtconv.model.savedmodel import load_saved_model

    sentence = f"SavedModel {unknown_rank_saved_model}: input 'anything' has an unknown rank"
    with pytest.raises(InputError) as without_tf:
        read_signature(unknown_rank_saved_model)
    with pytest.raises(InputError) as with_tf:
        load_saved_model(unknown_rank_saved_model)
    assert str(without_tf.value) == str(with_tf.value)
    assert str(with_tf.value).startswith(sentence) and "\n" not in str(with_tf.value)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["bench", "convert"])
@pytest.mark.tensorflow
def test_unknown_rank_commands_exit_1_with_that_sentence(
    unknown_rank_saved_model: Path, command: str
) -> None:
    import json

    from tests.helpers.cli_runner import run_cli

    extra = ["--precision", "fp32", "--output", str(unknown_rank_saved_model.parent / "out")]
    argv = [command, str(unknown_rank_saved_model), *(extra if command == "convert" else [])]
    done = run_cli(*argv, "--json")
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "InputError" and "has an unknown rank" in error["message"]
