"""Training end to end: the exported SavedModel is float32, accurate, and carries its card."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trtconv import api
from trtconv.calib.sources import load_digits
from trtconv.core.errors import InputError, UsageError
from trtconv.facts import probe_cpu
from trtconv.inspect.pipeline import graph_def_of, graph_dtypes
from trtconv.options.convert import ConvertOptions
from trtconv.options.shared import PreprocessingOptions
from trtconv.options.train import ClusterOptions, TrainOptions

LOW_PRECISION = {"bfloat16", "float16", "half"}


def _card(model_dir: Path) -> dict[str, Any]:
    return json.loads((model_dir / "trtconv.json").read_text())


@pytest.mark.slow
def test_reloaded_saved_model_is_accurate_with_float32_io(digits_model_dir: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    loaded = tf.saved_model.load(str(digits_model_dir / "saved_model"))
    serve = loaded.signatures["serving_default"]
    _, inputs = serve.structured_input_signature
    assert {name: spec.dtype for name, spec in inputs.items()} == {"image": tf.float32}
    test = load_digits("test")
    outputs = serve(image=tf.constant(test.x))
    assert set(outputs) == {"probabilities"}
    probabilities = outputs["probabilities"]
    assert probabilities.dtype == tf.float32
    accuracy = float(np.mean(np.argmax(probabilities.numpy(), axis=-1) == test.labels))
    assert accuracy >= 0.9
    np.testing.assert_allclose(probabilities.numpy().sum(axis=-1), 1.0, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.no_gpu
def test_model_card_records_the_policy_training_really_used(digits_model_dir: Path) -> None:
    card = _card(digits_model_dir)
    if not probe_cpu().has_bf16:
        pytest.skip("this CPU has no native bfloat16: auto trains in float32")
    assert card["amp"]["policy"] == "mixed_bfloat16"
    # Read from a hidden layer of the trained model, not from the requested policy.
    assert card["amp"]["training_compute_dtype"] == "bfloat16"
    assert card["exported_dtype"] == "float32"
    assert card["test_accuracy"] >= 0.9
    assert card["train_images_per_s"] > 0
    assert card["input"] == {"name": "image", "shape": [None, 8, 8, 1], "dtype": "float32"}
    assert card["labels"] == [str(i) for i in range(10)]


@pytest.mark.slow
def test_exported_graph_has_no_low_precision_dtype(digits_model_dir: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    loaded = tf.saved_model.load(str(digits_model_dir / "saved_model"))
    graph_def = graph_def_of(loaded.signatures["serving_default"])
    assert len(graph_def.library.function) >= 1  # the model body is a nested function
    dtypes = set(graph_dtypes(graph_def))
    assert "float32" in dtypes
    assert not dtypes & LOW_PRECISION


@pytest.mark.tensorflow
def test_dtype_scan_finds_bfloat16_inside_nested_functions() -> None:
    """Control for the test above: the scan does see bf16 when a nested function computes in it."""
    tf = pytest.importorskip("tensorflow")

    @tf.function
    def inner(x: Any) -> Any:
        return tf.cast(tf.cast(x, tf.bfloat16) * 2, tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def outer(x: Any) -> Any:
        return inner(x) + 1.0

    graph_def = graph_def_of(outer.get_concrete_function())
    top_level = {node.attr["T"].type for node in graph_def.node if "T" in node.attr}
    assert tf.bfloat16.as_datatype_enum not in top_level  # bf16 lives only in the nested body
    assert "bfloat16" in graph_dtypes(graph_def)


def _write_pngs(root: Path, per_class: int = 10) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for label, (name, level) in enumerate((("bright", 210), ("dark", 40))):
        folder = root / name
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = np.clip(level + rng.normal(0, 15, (12, 12, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{label}_{i}.png")
    (root / "dark" / "notes.txt").write_text("not an image: skipped")


@pytest.mark.slow
@pytest.mark.tensorflow
def test_trains_on_an_image_folder_at_its_own_size(tmp_path: Path) -> None:
    """Before: 12x12 RGB images were squeezed into the zoo model's 8x8 grey without a word."""
    _write_pngs(tmp_path / "images")
    card = api.train(TrainOptions(data=str(tmp_path / "images"), epochs=2, output=tmp_path / "out"))
    assert card.labels == ["bright", "dark"]
    assert card.data.train_samples + card.data.test_samples == 20
    assert card.input.shape == [None, 12, 12, 3]
    assert card.preprocessing["scale"] == pytest.approx(1 / 255)
    assert card.preprocessing["sources"]["scale"] == "default"
    assert card.output.shape == [None, 2]
    assert (tmp_path / "out" / "saved_model" / "saved_model.pb").is_file()


@pytest.mark.slow
@pytest.mark.tensorflow
def test_trains_on_an_image_folder_at_the_size_asked_for(tmp_path: Path) -> None:
    """Before: --image-size was ignored outside --benchmark."""
    _write_pngs(tmp_path / "images")
    card = api.train(
        TrainOptions(
            data=str(tmp_path / "images"),
            epochs=1,
            output=tmp_path / "out",
            image_size=16,
            preprocessing=PreprocessingOptions(mean=(0.5,), std=(0.25,)),
        )
    )
    assert card.input.shape == [None, 16, 16, 3]
    assert card.preprocessing["image_size"] == [16, 16]
    assert (card.preprocessing["mean"], card.preprocessing["std"]) == ([0.5], [0.25])
    with pytest.raises(UsageError, match="--image-size resizes image folders"):
        api.train(TrainOptions(data="digits", image_size=16, output=tmp_path / "other"))


@pytest.mark.slow
@pytest.mark.tensorflow
def test_uint8_pixels_train_and_convert_alike(tmp_path: Path) -> None:
    """uint8 pixels are raw pixels in train and convert alike: scaled by the model card's
    preprocessing. Before: train fed them unscaled, convert refused them; convert refused a
    train output directory; `auto` repeated every refusal in its one-line reason."""
    digits = load_digits("all").head(300)
    pixels = (digits.x * 255).round().astype(np.uint8)
    data = tmp_path / "pixels.npz"
    np.savez(data, x=pixels, y=digits.labels)
    card = api.train(TrainOptions(data=str(data), epochs=2, output=tmp_path / "model"))
    assert card.preprocessing["scale"] == pytest.approx(1 / 255)
    # Point decisions: 60 held-out samples cannot show fp32's 0.99 at 95% (381 can).
    result = api.convert(
        ConvertOptions(
            tmp_path / "model",
            "fp32",
            output=tmp_path / "fp32",
            calib_data=str(data),
            confidence=0.0,
        )
    ).to_json()
    assert result["validation"]["passed"]
    scale = result["manifest"]["data_contract"]["preprocessing"]["sources"]["scale"]
    assert scale == "model card"
    assert result["manifest"]["source_model"]["path"] == str(tmp_path / "model" / "saved_model")
    assert result["backend_reason"].startswith("auto: ") and "\n" not in result["backend_reason"]
    assert "; not " not in result["backend_reason"]  # the refusals go to --json only
    passed_over = result["backend_passed_over"]
    assert all(" (" in line for line in passed_over)
    assert result["backend"] != "ort" or any(line.startswith("tftrt (") for line in passed_over)
    int32 = tmp_path / "int32.npz"
    np.savez(int32, x=pixels.astype(np.int32), y=digits.labels)
    with pytest.raises(InputError, match="expects dtype float32, found int32"):
        api.train(TrainOptions(data=str(int32), epochs=1, output=tmp_path / "refused"))


@pytest.mark.slow
@pytest.mark.tensorflow
def test_trains_on_an_npz_without_claiming_a_scaling(tmp_path: Path) -> None:
    digits = load_digits("all").head(200)
    np.savez(tmp_path / "d.npz", x=digits.x, y=digits.labels)
    card = api.train(TrainOptions(data=str(tmp_path / "d.npz"), epochs=1, output=tmp_path / "out"))
    assert card.preprocessing["scale"] == 1.0
    assert card.data.train_samples == 160


def _bad_npz(tmp_path: Path, case: str) -> Path:
    rng = np.random.default_rng(0)
    x = rng.random((20, 8, 8, 1), dtype=np.float32)
    y = np.arange(20) % 4
    path = tmp_path / f"{case}.npz"
    if case == "empty":
        np.savez(path, x=x[:0], y=y[:0])
    elif case == "nan":
        x[3, 1, 1, 0] = np.nan
        np.savez(path, x=x, y=y)
    elif case == "negative_label":
        y[0] = -2
        np.savez(path, x=x, y=y)
    elif case == "three_d":
        np.savez(path, x=x[..., 0], y=y)
    elif case == "one_hot":
        np.savez(path, x=x, y=np.eye(4, dtype=np.int64)[y])
    elif case == "no_labels":
        np.savez(path, x=x)
    elif case == "one_class":
        np.savez(path, x=x, y=np.zeros(20, np.int64))
    elif case == "not_npz":
        path.write_text("not a zip archive")
    return path  # "missing": never written


BAD_CASES = {
    "empty": "0 samples",
    "nan": "NaN",
    "negative_label": "labels must lie in",
    "three_d": "4 dimensions",
    "one_hot": "shape",
    "no_labels": "no labels",
    "one_class": "single class",
    "not_npz": "not a readable .npz",
    "missing": "does not exist",
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_data_is_one_input_error_and_leaves_no_output(tmp_path: Path, case: str) -> None:
    data = _bad_npz(tmp_path, case)
    output = tmp_path / "out"
    with pytest.raises(InputError, match=BAD_CASES[case]) as raised:
        api.train(TrainOptions(data=str(data), output=output, epochs=1))
    assert "\n" not in str(raised.value)
    assert str(data.name) in str(raised.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ([data.name] if data.exists() else [])


def test_options_are_checked_before_training(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="known models: digits-cnn, resnet50"):
        api.train(TrainOptions(model="vgg", output=tmp_path / "a"))
    with pytest.raises(UsageError, match="--strategy"):
        api.train(TrainOptions(cluster=ClusterOptions(strategy="ring"), output=tmp_path / "b"))
    with pytest.raises(UsageError, match="no built-in training data"):
        api.train(TrainOptions(model="resnet50", output=tmp_path / "c"))
    assert list(tmp_path.iterdir()) == []


def test_existing_output_is_refused_and_left_intact(tmp_path: Path) -> None:
    output = tmp_path / "out"
    output.mkdir()
    (output / "keep.txt").write_text("precious")
    with pytest.raises(UsageError, match="already exists"):
        api.train(TrainOptions(output=output, epochs=1))
    assert [p.name for p in output.iterdir()] == ["keep.txt"]
    assert (output / "keep.txt").read_text() == "precious"
