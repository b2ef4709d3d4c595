"""TensorRT backend: tested up to the library boundary here, end to end under `gpu`.

TensorRT cannot be installed on this machine. The builder configuration is checked with a small
recording stand-in for the `tensorrt` module: it only records what we asked of it (flags,
profile shapes, timing cache, workspace) and never pretends an engine was built.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trtconv.backends.request import ConversionRequest
from trtconv.backends.trt import builder as trt_builder
from trtconv.backends.trt import converter as trt_converter
from trtconv.backends.trt.runner import TrtRunner
from trtconv.errors import ConversionError, InputError, MissingDependencyError, UsageError
from trtconv.model_io import ModelSignature, TensorSpec

SIGNATURE = ModelSignature(
    (TensorSpec("image", (None, 8, 8, 1), "float32"),),
    (TensorSpec("probabilities", (None, 10), "float32"),),
)


class Recorder:
    """Records the calls made on it: [(method, args), ...] in a shared log."""

    def __init__(self, log: list[tuple[str, tuple[Any, ...]]], prefix: str) -> None:
        self._log, self._prefix = log, prefix

    def _record(self, method: str, *args: Any) -> None:
        self._log.append((f"{self._prefix}.{method}", args))


class RecordingProfile(Recorder):
    def set_shape(self, name: str, low: Any, opt: Any, high: Any) -> None:
        self._record("set_shape", name, low, opt, high)


class RecordingConfig(Recorder):
    def set_memory_pool_limit(self, pool: str, size: int) -> None:
        self._record("set_memory_pool_limit", pool, size)

    def set_flag(self, flag: str) -> None:
        self._record("set_flag", flag)

    def clear_flag(self, flag: str) -> None:
        self._record("clear_flag", flag)

    def add_optimization_profile(self, profile: RecordingProfile) -> int:
        self._record("add_optimization_profile", profile)
        return 0

    def create_timing_cache(self, data: bytes) -> str:
        self._record("create_timing_cache", data)
        return "cache-object"

    def set_timing_cache(self, cache: str, ignore_mismatch: bool) -> bool:
        self._record("set_timing_cache", cache, ignore_mismatch)
        return True

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):  # e.g. int8_calibrator: record that we set it
            self._record(f"set:{name}", value)
        super().__setattr__(name, value)


class RecordingBuilder(Recorder):
    def create_builder_config(self) -> RecordingConfig:
        return RecordingConfig(self._log, "config")

    def create_optimization_profile(self) -> RecordingProfile:
        return RecordingProfile(self._log, "profile")


class FakeTensorrt:
    """Enum members as plain names: enough to see which ones we passed."""

    class BuilderFlag:
        FP16, INT8, TF32 = "FP16", "INT8", "TF32"

    class MemoryPoolType:
        WORKSPACE = "WORKSPACE"


def configure(precision: str, batch_sizes: tuple[int, ...] = (1, 8, 32), cache: bytes = b""):
    log: list[tuple[str, tuple[Any, ...]]] = []
    shapes = trt_builder.profile_shapes([("image", (-1, 8, 8, 1))], batch_sizes)
    trt_builder.configure_builder(
        FakeTensorrt, RecordingBuilder(log, "builder"), precision, shapes, cache
    )
    return log


def calls(log: list[tuple[str, tuple[Any, ...]]], name: str) -> list[tuple[Any, ...]]:
    return [args for method, args in log if method == name]


# --- builder configuration ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("precision", "set_flags", "cleared"),
    [
        ("fp32", [], [("TF32",)]),  # TF32 is on by default in TensorRT: fp32 must clear it
        ("tf32", [("TF32",)], []),
        ("fp16", [("FP16",)], []),
        ("int8", [("INT8",)], []),
    ],
)
def test_flags_per_precision(precision: str, set_flags: list[Any], cleared: list[Any]) -> None:
    log = configure(precision)
    assert calls(log, "config.set_flag") == set_flags
    assert calls(log, "config.clear_flag") == cleared


def test_int8_is_explicit_no_calibrator() -> None:
    log = configure("int8")
    assert not [m for m, _ in log if "calibrat" in m]


def test_profile_spans_the_batch_sizes() -> None:
    log = configure("fp16", batch_sizes=(8, 1, 32))
    assert calls(log, "profile.set_shape") == [
        ("image", (1, 8, 8, 1), (32, 8, 8, 1), (32, 8, 8, 1))
    ]
    assert len(calls(log, "config.add_optimization_profile")) == 1


def test_timing_cache_is_loaded_and_mismatches_refused() -> None:
    log = configure("fp32", cache=b"previous-cache")
    assert calls(log, "config.create_timing_cache") == [(b"previous-cache",)]
    assert calls(log, "config.set_timing_cache") == [("cache-object", False)]
    assert calls(log, "config.set_memory_pool_limit") == [
        ("WORKSPACE", trt_builder.WORKSPACE_BYTES)
    ]


def test_profile_shapes_from_a_signature_with_several_inputs() -> None:
    shapes = trt_builder.profile_shapes([("a", (-1, 3)), ("b", (None, 2, 2))], (4,))
    assert shapes == {"a": ((4, 3), (4, 3), (4, 3)), "b": ((4, 2, 2), (4, 2, 2), (4, 2, 2))}


def test_profile_shapes_refuse_what_tensorrt_cannot_build() -> None:
    with pytest.raises(InputError, match="dynamic dimensions"):
        trt_builder.profile_shapes([("image", (-1, -1, -1, 3))], (1,))
    with pytest.raises(InputError, match="fixed batch of 1"):
        trt_builder.profile_shapes([("image", (1, 8, 8, 1))], (1, 8))
    with pytest.raises(UsageError):
        trt_builder.profile_shapes([("image", (-1, 8))], ())
    with pytest.raises(UsageError):
        trt_builder.precision_flags("bf16")


def test_source_onnx_is_the_qdq_model_for_int8(tmp_path: Path) -> None:
    request = ConversionRequest(
        tmp_path, SIGNATURE, "int8", tmp_path, onnx_path=tmp_path / "model.onnx"
    )
    with pytest.raises(UsageError, match="Q/DQ"):
        trt_converter.source_onnx(request)
    request.qdq_onnx_path = tmp_path / "model.qdq.onnx"
    assert trt_converter.source_onnx(request) == tmp_path / "model.qdq.onnx"
    request.precision = "fp16"
    assert trt_converter.source_onnx(request) == tmp_path / "model.onnx"


def test_parser_errors_are_reported(tmp_path: Path) -> None:
    class Parser:
        num_errors = 2

        def __init__(self, network: Any, logger: Any) -> None:
            self.paths: list[str] = []

        def parse_from_file(self, path: str) -> bool:
            self.paths.append(path)
            return False

        def get_error(self, index: int) -> str:
            return f"node {index}: unsupported"

    class Trt(FakeTensorrt):
        OnnxParser = Parser

    class Builder:
        def create_network(self, flags: int) -> str:
            assert flags == 0  # TensorRT 10: explicit batch is implied, the flag is deprecated
            return "network"

    with pytest.raises(ConversionError, match="node 0: unsupported; node 1: unsupported"):
        trt_builder.parse_onnx(Trt, Builder(), None, tmp_path / "model.onnx")


# --- without TensorRT ------------------------------------------------------------------------


def test_module_imports_without_tensorrt() -> None:
    code = (
        "import sys; sys.modules['tensorrt'] = None; sys.modules['cuda'] = None\n"
        "import trtconv.backends.trt\n"
        "print('tensorflow' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.no_gpu
def test_convert_here_is_exit_3_naming_the_extra_and_the_gpu(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    request = ConversionRequest(
        tmp_path, SIGNATURE, "fp16", staging, (1, 8), onnx_path=tmp_path / "model.onnx"
    )
    with pytest.raises(MissingDependencyError) as caught:
        trt_converter.convert(request)
    assert caught.value.exit_code == 3
    assert "pip install 'trtconv[trt]'" in str(caught.value)
    assert "GPU" in str(caught.value)
    assert list(staging.iterdir()) == []


@pytest.mark.no_gpu
def test_runner_here_is_exit_3(tmp_path: Path) -> None:
    (tmp_path / "model.plan").write_bytes(b"not an engine")
    with pytest.raises(MissingDependencyError):
        TrtRunner(tmp_path / "model.plan", SIGNATURE).activate()


# --- end to end on a GPU with TensorRT >= 10 --------------------------------------------------


@pytest.mark.gpu
@pytest.mark.converts("trt")
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_build_and_run_engine_on_gpu(
    digits_saved_model: Path, tmp_path: Path, precision: str
) -> None:
    from convert_fixtures import digits_onnx

    from trtconv.calib.sources import load_digits
    from trtconv.savedmodel import load_saved_model

    loaded = load_saved_model(digits_saved_model)
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    request = ConversionRequest(
        digits_saved_model,
        loaded.signature,
        precision,
        artifact,
        (1, 8, 32),
        onnx_path=digits_onnx(digits_saved_model),
    )
    outcome = trt_converter.convert(request)
    assert (artifact / "model.plan").stat().st_size > 0
    assert (artifact / "timing.cache").stat().st_size > 0
    assert outcome.summary["layers"] > 0
    name = loaded.signature.input_names[0]
    images = load_digits("test").x[:8]
    with TrtRunner(artifact / outcome.payload, loaded.signature, precision) as runner:
        got = runner.infer({name: images})
        timings = runner.last_timings
    want = {k: v.numpy() for k, v in loaded.function(**{name: images}).items()}
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, atol=1e-3 if precision == "fp32" else 2e-2)
    assert timings is not None and timings.compute_ms > 0 and timings.transfer_ms > 0
