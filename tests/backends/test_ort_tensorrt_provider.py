"""ONNX Runtime's TensorRT execution provider (`--device tensorrt` on an ort artifact) gets the
precision flags of the artifact and an engine cache of its own.

The provider cannot load here (no TensorRT libraries): the options are checked as given to the
session. Unverified on GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.ort_manifests import ort_manifest
from trtconv.backends.ort.runner import ENGINE_CACHE_ENV, ort_runner
from trtconv.onnxlib.session import CPU, CUDA, TENSORRT
from trtconv.protocol.runner import RunOptions

BOOLEANS = ("trt_fp16_enable", "trt_int8_enable", "trt_engine_cache_enable")


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ENGINE_CACHE_ENV, str(tmp_path / "engines"))
    path = tmp_path / "artifact" / "model.onnx"
    path.parent.mkdir()
    path.write_bytes(b"an ONNX model")
    return path


@pytest.mark.parametrize(
    ("precision", "fp16", "int8"),
    [
        ("fp32", "False", "False"),
        ("tf32", "False", "False"),
        ("fp16", "True", "False"),  # the fp16 artifact's kernels, not fp32 ones
        ("int8", "True", "True"),  # Q/DQ in int8, the rest may use fp16 (as --backend trt)
    ],
)
def test_tensorrt_provider_gets_the_artifacts_precision(
    precision: str, fp16: str, int8: str, model: Path, tmp_path: Path
) -> None:
    runner = ort_runner(model, ort_manifest(precision), RunOptions(device="tensorrt"))
    assert runner.providers == [TENSORRT, CUDA, CPU]
    tensorrt, cuda, cpu = runner.options or []
    assert (tensorrt["trt_fp16_enable"], tensorrt["trt_int8_enable"]) == (fp16, int8)
    # ONNX Runtime's Python binding takes "True"/"False" for these, and refuses "1".
    assert {tensorrt[key] for key in BOOLEANS} <= {"True", "False"}
    assert tensorrt["trt_engine_cache_enable"] == "True"
    cache = Path(tensorrt["trt_engine_cache_path"])
    assert cache.is_dir() and cache.parent == tmp_path / "engines"
    assert cuda == {"use_tf32": "1" if precision == "tf32" else "0"} and cpu == {}


def test_each_model_and_precision_has_its_own_engine_cache(model: Path) -> None:
    """ONNX Runtime names engines after the graph's structure, not its weights: another model,
    a rewritten one, or another precision must not find this one's engines."""

    def cache(path: Path, precision: str = "fp16") -> str:
        options = ort_runner(path, ort_manifest(precision), RunOptions(device="tensorrt")).options
        return (options or [{}])[0]["trt_engine_cache_path"]

    first = cache(model)
    assert cache(model) == first  # the same model finds its engines again
    assert cache(model, "int8") != first
    other = model.parent.parent / "other" / "model.onnx"
    other.parent.mkdir()
    other.write_bytes(b"an ONNX model")
    assert cache(other) != first
    model.write_bytes(b"an ONNX model, converted again")
    assert cache(model) != first


def test_no_engine_cache_where_its_folder_cannot_be_made(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(ENGINE_CACHE_ENV, str(tmp_path / "a-file"))
    options = ort_runner(model, ort_manifest("fp16"), RunOptions(device="tensorrt")).options
    tensorrt = (options or [{}])[0]
    assert tensorrt == {"trt_fp16_enable": "True", "trt_int8_enable": "False"}
