"""The extras install one consistent GPU stack (checked on pyproject.toml, no network)."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PYPROJECT = Path(__file__).parent.parent / "pyproject.toml"


def _requirements(group: str | None = None) -> dict[str, Requirement]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    found = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return {Requirement(line).name: Requirement(line) for line in found}


def test_onnxruntime_gpu_replaces_onnxruntime_instead_of_joining_it() -> None:
    assert "onnxruntime" not in _requirements()  # the base install chooses neither
    assert set(_requirements("cpu")) == {"onnxruntime"}
    for group in ("gpu", "gpu-cu12"):
        assert set(_requirements(group)) == {"onnxruntime-gpu"}


def test_onnxruntime_gpu_brings_cudnn_9_that_does_not_clash_with_tensorflows() -> None:
    """onnxruntime-gpu 1.27+ takes nvidia-cudnn-cu13 9.x; 1.20-1.26 take nvidia-cudnn-cu12 9.x,
    which clashes with tensorflow[and-cuda] 2.17's nvidia-cudnn-cu12==8.9.7.29."""
    gpu, cu12 = (
        _requirements("gpu")["onnxruntime-gpu"],
        _requirements("gpu-cu12")["onnxruntime-gpu"],
    )
    assert {"cuda", "cudnn"} <= gpu.extras and {"cuda", "cudnn"} <= cu12.extras
    assert not any(Version(v) in gpu.specifier for v in ("1.20.0", "1.26.0"))
    assert Version("1.31.1") in gpu.specifier
    assert not any(Version(v) in cu12.specifier for v in ("1.27.0", "1.31.1"))


def test_tensorrt_and_cuda_python_share_one_cuda_major() -> None:
    for group, major in (("trt", 13), ("trt-cu12", 12)):
        requirements = _requirements(group)
        assert set(requirements) == {f"tensorrt-cu{major}", "cuda-python"}
        cuda = requirements["cuda-python"].specifier
        assert Version(f"{major}.9.0") in cuda
        assert not any(
            Version(f"{other}.0.0") in cuda for other in (11, 12, 13, 14) if other != major
        )
        tensorrt = requirements[f"tensorrt-cu{major}"].specifier
        assert Version("11.4.0.106") in tensorrt and Version("12.0.0") not in tensorrt
