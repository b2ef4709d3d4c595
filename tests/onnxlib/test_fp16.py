"""Mixed float16 (trtconv.onnxlib.fp16, fp16_analysis): the faithful emulation, the rule that keeps
nodes in float32, and the mixed model, on tiny ONNX graphs built here and run by ONNX Runtime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.transformers.float16 import convert_float_to_float16

from trtconv.onnxlib import fp16_analysis
from trtconv.onnxlib.fp16 import emulate_float16, emulation_session, to_mixed_float16
from trtconv.onnxlib.fp16_analysis import RANGE_LIMIT, analyse, analysis_batches

FLOAT16_MAX = 65504.0


def model_of(nodes: list[Any], initializers: dict[str, np.ndarray], width: int, out: int) -> Any:
    """A float32 model x [N, width] -> y [N, out] of `nodes` (opset 17)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", out])],
        [numpy_helper.from_array(v.astype(np.float32), name) for name, v in initializers.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def overflow_model() -> Any:
    """x @ W (values ~1e5: above float16's range) -> layer normalisation written out as
    ReduceMean/Sub/Mul/ReduceMean/Add/Sqrt/Div (as tf2onnx exports Keras') -> @ V -> Softmax."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="wide"),
        helper.make_node("ReduceMean", ["h"], ["mean"], name="norm/mean", axes=[1]),
        helper.make_node("Sub", ["h", "mean"], ["centred"], name="norm/centre"),
        helper.make_node("Mul", ["centred", "centred"], ["square"], name="norm/square"),
        helper.make_node("ReduceMean", ["square"], ["variance"], name="norm/variance", axes=[1]),
        helper.make_node("Add", ["variance", "eps"], ["shifted"], name="norm/eps"),
        helper.make_node("Sqrt", ["shifted"], ["std"], name="norm/std"),
        helper.make_node("Div", ["centred", "std"], ["normal"], name="norm/scale"),
        helper.make_node("MatMul", ["normal", "v"], ["logits"], name="head"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1),
    ]
    weights = {
        "w": rng.normal(0, 3e4, (4, 16)),
        "eps": np.array(1e-3),
        "v": rng.normal(0, 1, (16, 5)),
    }
    return model_of(nodes, weights, 4, 5)


NORMALISATION = {f"norm/{n}" for n in ("mean", "centre", "square", "variance", "eps", "std")}


def inputs(samples: int = 64, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, (samples, 4)).astype(np.float32)


def run(model: Any, x: np.ndarray, session: Any = None) -> np.ndarray:
    """y of `model` on x: float32 ORT (default options) unless `session` is given."""
    session = session or ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return np.asarray(session.run(["y"], {"x": x})[0])


def test_the_cpu_provider_hides_float16_overflow_and_the_emulation_shows_it() -> None:
    model, x = overflow_model(), inputs()
    reference = run(model, x)
    plain = to_mixed_float16(model)
    assert {i.data_type for i in plain.graph.initializer} == {TensorProto.FLOAT16}
    # ONNX Runtime's CPU provider computes the float16 nodes in float32: no overflow shows.
    cpu = run(plain, x)
    assert np.isfinite(cpu).all() and (cpu.argmax(1) == reference.argmax(1)).mean() > 0.9
    emulated = run(model, x, emulation_session(emulate_float16(plain)))
    assert not np.isfinite(emulated).all()  # |x @ W| > 65504 is inf in float16


def test_the_emulation_rounds_every_float16_tensor_where_it_is_made() -> None:
    nodes = [
        helper.make_node("Mul", ["x", "third"], ["a"], name="scale"),
        helper.make_node("Add", ["a", "big"], ["y"], name="shift"),
    ]
    model = model_of(nodes, {"third": np.full(3, 1 / 3), "big": np.array([0.0, 0.0, 6e4])}, 3, 3)
    x = np.array([[1.0, 1000.0, 2e4]], np.float32)
    emulated = run(model, x, emulation_session(emulate_float16(to_mixed_float16(model))))
    half = np.float16
    third, big = half(1 / 3), np.array([0.0, 0.0, 6e4], half)
    a = (x.astype(half).astype(np.float32) * np.float32(third)).astype(half)  # float32 math
    with np.errstate(over="ignore"):
        expected = (a.astype(np.float32) + big.astype(np.float32)).astype(half).astype(np.float32)
    np.testing.assert_array_equal(emulated, expected)
    assert np.isinf(emulated[0, 2])  # 2e4 / 3 + 6e4 > 65504


def test_the_overflow_and_its_normalisation_are_kept_and_the_rest_is_float16() -> None:
    model, x = overflow_model(), inputs()
    batches = list(analysis_batches([{"x": x}], 48, 16))
    assert [len(b["x"]) for b in batches] == [16, 16, 16]
    analysis = analyse(model, batches)
    assert set(analysis.kept) == {"wide", *NORMALISATION, "norm/scale"}
    assert all(why.startswith("range") for why in analysis.kept.values())
    assert analysis.plain["y"].nonfinite > 0
    assert analysis.mixed["y"].nonfinite == 0 and analysis.mixed["y"].max_abs_error < 1e-2
    mixed = to_mixed_float16(model, set(analysis.kept))
    onnx.checker.check_model(mixed)  # topologically sorted, every tensor defined once
    emulated = run(model, inputs(256, 2), emulation_session(emulate_float16(mixed)))
    reference = run(model, inputs(256, 2))
    assert (emulated.argmax(1) == reference.argmax(1)).mean() >= 0.99
    types = {
        v.name: v.type.tensor_type.elem_type
        for v in onnx.shape_inference.infer_shapes(mixed).graph.value_info
    }
    assert types["logits"] == TensorProto.FLOAT16  # the head computes in float16
    for node in mixed.graph.node:  # the kept nodes read and write float32 only
        if node.name in analysis.kept:
            tensors = [name for name in [*node.input, *node.output] if name in types]
            assert {types[name] for name in tensors} == {TensorProto.FLOAT}, node.name


def test_kept_nodes_read_float32_from_each_other_not_a_float16_round_trip() -> None:
    model = overflow_model()
    mixed = to_mixed_float16(model, {"wide", *NORMALISATION, "norm/scale"})
    producer = {output: node for node in mixed.graph.node for output in node.output}
    for node in mixed.graph.node:
        source = producer.get(node.input[0]) if node.input else None
        round_trip = (
            node.op_type == "Cast"
            and source is not None
            and source.op_type == "Cast"
            and source.attribute[0].i == TensorProto.FLOAT16
        )
        assert not round_trip, node.name
    x = inputs()
    float32 = run(model, x)
    np.testing.assert_allclose(
        run(model, x, emulation_session(emulate_float16(mixed))), float32, atol=1e-2
    )


def test_two_kept_nodes_reading_one_float16_tensor_make_a_valid_model() -> None:
    # The library gives each kept reader a Cast node of the same name and output.
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Exp", ["r"], ["e"], name="exp"),
        helper.make_node("Neg", ["r"], ["n"], name="neg"),
        helper.make_node("Add", ["e", "n"], ["y"], name="add"),
    ]
    model = model_of(nodes, {}, 2, 2)
    mixed = to_mixed_float16(model, {"exp", "neg"})
    onnx.checker.check_model(mixed)
    x = np.array([[0.5, 2.0]], np.float32)
    np.testing.assert_allclose(run(mixed, x), run(model, x), rtol=1e-3)


def cancellation_model() -> Any:
    """(x + 1000) - 1000, doubled: in float16 1000 + x keeps steps of 0.5, so x is lost."""
    nodes = [
        helper.make_node("Add", ["x", "offset"], ["shifted"], name="shift"),
        helper.make_node("Sub", ["shifted", "offset"], ["back"], name="unshift"),
        helper.make_node("Mul", ["back", "two"], ["y"], name="double"),
    ]
    return model_of(nodes, {"offset": np.array(1000.0), "two": np.array(2.0)}, 4, 4)


def test_cancellation_is_kept_by_its_ranges() -> None:
    assert RANGE_LIMIT > 1001
    analysis = analyse(cancellation_model(), [{"x": inputs()}])
    assert analysis.kept["unshift"].startswith("cancellation: inputs 17")
    assert analysis.kept["shift"].startswith("cancellation: feeds unshift")
    assert set(analysis.kept) == {"shift", "unshift"}
    assert analysis.plain["y"].relative_error > 0.1
    assert analysis.mixed["y"].relative_error < 1e-2


def test_cancellation_the_ranges_miss_is_kept_by_the_loss_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fp16_analysis, "CANCELLATION_LIMIT", 1e9)
    analysis = analyse(cancellation_model(), [{"x": inputs()}])
    assert analysis.kept["unshift"].startswith("loss")
    assert set(analysis.kept) == {"shift", "unshift"}
    assert analysis.mixed["y"].relative_error < 1e-2


def test_a_plain_cnn_like_graph_stays_float16() -> None:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="dense"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "v"], ["logits"], name="head"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1),
    ]
    weights = {"w": rng.normal(0, 1, (4, 16)), "v": rng.normal(0, 1, (16, 5))}
    analysis = analyse(model_of(nodes, weights, 4, 5), [{"x": inputs()}])
    assert analysis.kept == {}
    assert analysis.plain["y"].top1_agree == analysis.plain["y"].rows == 64


def test_without_onnxruntime_float16_copies_are_exit_3_with_the_install_hint(
    tmp_path: Path,
) -> None:
    model = tmp_path / "model.onnx"
    onnx.save(overflow_model(), str(model))
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "from pathlib import Path\n"
        "from trtconv.core.errors import MissingDependencyError\n"
        "from trtconv.onnxlib.export import to_float16\n"
        "from trtconv.onnxlib.fp16 import load_model, to_mixed_float16\n"
        "for make in (lambda: to_float16(Path(sys.argv[1]), Path(sys.argv[2])),\n"
        "             lambda: to_mixed_float16(load_model(Path(sys.argv[1])))):\n"
        "    try:\n"
        "        make()\n"
        "    except MissingDependencyError as error:\n"
        "        print(error.exit_code, error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(model), str(tmp_path / "out.onnx")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("3 onnxruntime.transformers.float16 is not importable")
        assert "pip install 'trtconv[cpu]'" in line


def test_float16_inputs_and_outputs_are_emulated_as_float32_rounded_through_float16() -> None:
    nodes = [helper.make_node("Mul", ["x", "two"], ["y"], name="double")]
    model = model_of(nodes, {"two": np.array(2.0)}, 2, 2)
    all_half = emulate_float16(convert_float_to_float16(model, keep_io_types=False))
    assert [v.type.tensor_type.elem_type for v in all_half.graph.input] == [TensorProto.FLOAT]
    x = np.array([[1 / 3, 4e4]], np.float32)
    got = run(model, x, emulation_session(all_half))
    expected = run(model, x, emulation_session(emulate_float16(to_mixed_float16(model))))
    np.testing.assert_array_equal(got, expected)  # the same as float32 inputs cast to float16
    assert got[0, 0] == np.float32(np.float16(1 / 3)) * 2 and np.isinf(got[0, 1])


def log_power_model(floor: float = 1e-8) -> Any:
    """A spectral front end written out: x [N, 16] (quiet, ~1e-3) @ W (small weights) -> square
    -> + floor -> Log -> per-sample normalisation (subtract the mean, divide by the standard
    deviation) -> @ V -> Sigmoid. Its squares lie below float16's smallest normal value."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["spectrum"], name="front/transform"),
        helper.make_node("Mul", ["spectrum", "spectrum"], ["power"], name="front/square"),
        helper.make_node("Add", ["power", "floor"], ["floored"], name="front/floor"),
        helper.make_node("Log", ["floored"], ["logs"], name="front/log"),
        helper.make_node("ReduceMean", ["logs"], ["mean"], name="norm/mean", axes=[1]),
        helper.make_node("Sub", ["logs", "mean"], ["centred"], name="norm/centre"),
        helper.make_node("Mul", ["centred", "centred"], ["square"], name="norm/square"),
        helper.make_node("ReduceMean", ["square"], ["variance"], name="norm/variance", axes=[1]),
        helper.make_node("Sqrt", ["variance"], ["std"], name="norm/std"),
        helper.make_node("Div", ["centred", "std"], ["normal"], name="norm/scale"),
        helper.make_node("MatMul", ["normal", "v"], ["logits"], name="head"),
        helper.make_node("Sigmoid", ["logits"], ["y"], name="sigmoid"),
    ]
    weights = {
        "w": rng.normal(0, 1 / 16, (16, 12)),
        "floor": np.array(floor),
        "v": rng.normal(0, 1, (12, 3)),
    }
    return model_of(nodes, weights, 16, 3)


FRONT = {f"front/{n}" for n in ("transform", "square", "floor", "log")}


def worst(got: np.ndarray, want: np.ndarray) -> float:
    """The largest |got - want|, inf where got is not finite."""
    return float(np.where(np.isfinite(got), np.abs(got - want), np.inf).max())


def quiet(samples: int = 64, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1e-3, (samples, 16)).astype(np.float32)


def test_small_values_feeding_a_log_are_kept_back_to_where_they_are_normal() -> None:
    model, x = log_power_model(), quiet()
    emulated = run(model, x, emulation_session(emulate_float16(to_mixed_float16(model))))
    assert worst(emulated, run(model, x)) > 0.1  # the plain float16 copy underflows
    analysis = analyse(model, [{"x": x}])
    assert analysis.kept.keys() >= FRONT
    assert analysis.kept["front/log"].startswith("underflow: 100% of its input below 6.1e-05")
    assert analysis.kept["front/transform"] == "underflow: feeds front/log values below 6.1e-05"
    assert "head" not in analysis.kept and "sigmoid" not in analysis.kept
    assert analysis.plain["power"].tiny_share > 0.5 and analysis.plain["logs"].tiny_share == 0
    mixed = to_mixed_float16(model, set(analysis.kept))
    onnx.checker.check_model(mixed)
    held_out = quiet(256, 2)
    emulated = run(model, held_out, emulation_session(emulate_float16(mixed)))
    assert worst(emulated, run(model, held_out)) < 1e-2


def test_values_of_normal_size_keep_a_log_and_a_division_in_float16() -> None:
    model = log_power_model(floor=1e-2)  # a loud signal, a floor in float16's normal range
    analysis = analyse(model, [{"x": quiet() * 1000}])
    assert not analysis.kept.keys() & {*FRONT, "norm/std", "norm/scale"}
    assert analysis.mixed["y"].max_abs_error < 1e-2


def softmax_written_out() -> tuple[Any, np.ndarray]:
    """exp(x) / sum(exp(x)) over logits x in [-25, -18] (no max subtracted): every exp is below
    float16's smallest subnormal."""
    nodes = [
        helper.make_node("Exp", ["x"], ["e"], name="exp"),
        helper.make_node("ReduceSum", ["e", "axes"], ["total"], name="sum", keepdims=1),
        helper.make_node("Div", ["e", "total"], ["y"], name="divide"),
    ]
    model = model_of(nodes, {"axes": np.array([1])}, 5, 5)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array([1]), "axes"))
    x = np.random.default_rng(4).uniform(-25, -18, (64, 5)).astype(np.float32)
    return model, x


def rms_norm() -> tuple[Any, np.ndarray]:
    """x / sqrt(mean(x^2) + 1e-12) of values ~1e-3: the mean of squares is ~1e-6."""
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["square"], name="square"),
        helper.make_node("ReduceMean", ["square"], ["mean"], name="mean", axes=[1]),
        helper.make_node("Add", ["mean", "eps"], ["shifted"], name="eps"),
        helper.make_node("Sqrt", ["shifted"], ["rms"], name="rms"),
        helper.make_node("Div", ["x", "rms"], ["y"], name="scale"),
    ]
    model = model_of(nodes, {"eps": np.array(1e-12)}, 8, 8)
    return model, np.random.default_rng(5).normal(0, 1e-3, (64, 8)).astype(np.float32)


@pytest.mark.parametrize(
    ("build", "kept"),
    [
        (softmax_written_out, {"exp", "sum", "divide"}),
        (rms_norm, {"square", "mean", "eps", "rms"}),
    ],
)
def test_small_values_in_a_division_or_a_square_root_are_kept(build: Any, kept: set[str]) -> None:
    model, x = build()
    plain = run(model, x, emulation_session(emulate_float16(to_mixed_float16(model))))
    assert worst(plain, run(model, x)) > 0.1
    analysis = analyse(model, [{"x": x}])
    assert set(analysis.kept) == kept
    assert all(why.startswith("underflow") for why in analysis.kept.values())
    assert analysis.mixed["y"].max_abs_error < 1e-2
