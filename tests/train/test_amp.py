"""AMP policy choice and that the policy is really applied when the model is built."""

from __future__ import annotations

import pytest

from trtconv.core.errors import UsageError
from trtconv.facts import Facts, Gpu, described, probe_cpu
from trtconv.train.amp import choose_policy, policy_scope
from trtconv.train.fit import build_compiled
from trtconv.zoo import get_model


def test_no_amp_is_float32() -> None:
    choice = choose_policy(False, "auto")
    assert choice.policy == "float32"
    assert not choice.loss_scaling


def test_unknown_amp_dtype_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--amp-dtype must be one of"):
        choose_policy(True, "int8")


@pytest.mark.no_gpu
def test_auto_on_this_cpu_machine_is_bfloat16_exactly_when_the_cpu_computes_it() -> None:
    expected = "mixed_bfloat16" if probe_cpu().has_bf16 else "float32"
    assert choose_policy(True, "auto").policy == expected
    assert choose_policy(True, "float16").loss_scaling
    assert not choose_policy(True, "bfloat16").loss_scaling


@pytest.mark.parametrize(
    ("machine", "policy"),
    [
        (described(cpu_features=("avx2", "fma")), "float32"),
        (described(cpu_features=("avx512f", "avx512_bf16")), "mixed_bfloat16"),
        (described(cpu_features=("amx_bf16",), gpus=[Gpu("Tesla T4", (7, 5))]), "mixed_float16"),
        (described(gpus=[Gpu("Tesla P100", (6, 0))]), "float32"),
    ],
)
def test_auto_policy_on_described_machines(machine: Facts, policy: str) -> None:
    """Tensor-core GPUs get float16 (with loss scaling), bf16 CPUs bfloat16, the rest float32."""
    choice = choose_policy(True, "auto", machine)
    assert choice.policy == policy
    assert choice.loss_scaling == (policy == "mixed_float16")


@pytest.mark.tensorflow
def test_build_compiled_applies_the_policy_and_restores_the_global_one() -> None:
    keras = pytest.importorskip("keras")
    keras.mixed_precision.set_global_policy("float32")
    model = build_compiled(
        get_model("digits-cnn"), (8, 8, 1), 10, choose_policy(True, "bfloat16"), xla=False
    )
    conv = model.get_layer("conv1")
    assert conv.compute_dtype == "bfloat16"
    assert conv.variable_dtype == "float32"  # AMP keeps float32 master weights
    assert model.get_layer("logits").compute_dtype == "float32"
    assert model.output.dtype == "float32"
    assert keras.mixed_precision.global_policy().name == "float32"


@pytest.mark.tensorflow
def test_float16_wraps_the_optimizer_in_loss_scaling() -> None:
    keras = pytest.importorskip("keras")
    model = build_compiled(
        get_model("digits-cnn"), (8, 8, 1), 10, choose_policy(True, "float16"), xla=False
    )
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.get_layer("conv2").compute_dtype == "float16"


@pytest.mark.tensorflow
def test_policy_scope_restores_after_an_error() -> None:
    keras = pytest.importorskip("keras")
    keras.mixed_precision.set_global_policy("float32")
    with pytest.raises(RuntimeError), policy_scope("mixed_bfloat16"):
        assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
        raise RuntimeError("boom")
    assert keras.mixed_precision.global_policy().name == "float32"
