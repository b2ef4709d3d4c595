"""Every registered model builds, emits float32 logits, and is covered here."""

from __future__ import annotations

import pytest

from trtconv.core.errors import UsageError
from trtconv.train.amp import policy_scope
from trtconv.zoo import MODELS, get_model

# model name -> (test input shape, classes): small so that building is quick.
TEST_SHAPES = {
    "digits-cnn": ((8, 8, 1), 10),
    "resnet50": ((32, 32, 3), 7),
}


def test_all_models_tested() -> None:
    assert set(TEST_SHAPES) == set(MODELS)


@pytest.mark.parametrize("name", sorted(TEST_SHAPES))
@pytest.mark.tensorflow
def test_model_builds_with_float32_logits_under_mixed_precision(name: str) -> None:
    keras = pytest.importorskip("keras")
    input_shape, classes = TEST_SHAPES[name]
    with policy_scope("mixed_bfloat16"):
        model = get_model(name).build(input_shape, classes)
    assert model.input_shape == (None, *input_shape)
    assert model.output_shape == (None, classes)
    # The last layer stays float32 so the softmax, the loss and the export are float32.
    assert model.layers[-1].compute_dtype == "float32"
    assert keras.mixed_precision.global_policy().name == "float32"


@pytest.mark.tensorflow
def test_resnet50_is_v15_with_stride_on_the_3x3_conv() -> None:
    pytest.importorskip("keras")
    model = get_model("resnet50").build((224, 224, 3), 1000)
    assert model.get_layer("s2b1_conv1").strides == (1, 1)
    assert model.get_layer("s2b1_conv2").strides == (2, 2)
    assert model.get_layer("s2b1_proj").strides == (2, 2)
    convs = [layer for layer in model.layers if type(layer).__name__ == "Conv2D"]
    assert len(convs) == 53  # 1 stem + 16 blocks x 3 + 4 projections
    # ResNet-50 has ~25.5M parameters (no conv biases: BatchNorm follows every conv).
    assert 25.4e6 < model.count_params() < 25.7e6


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match="known models: digits-cnn, resnet50"):
        get_model("resnet18")


def test_registry_defaults_are_sane() -> None:
    for config in MODELS.values():
        assert config.num_classes >= 2
        assert config.default_batch_size >= 1
        assert config.input_shape[-1] in (1, 3)
