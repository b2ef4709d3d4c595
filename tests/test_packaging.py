"""The extras install one consistent GPU stack and keep the user's TensorFlow (checked on
pyproject.toml; one test asks PyPI what an install beside tensorflow-cpu 2.21 would resolve)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from trtconv.serving.server.triton_install import TRITON_WHEEL

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


def test_tensorflow_is_the_users_not_a_requirement() -> None:
    """`tensorflow` and `tensorflow-cpu` install one package under two names: requiring either
    adds it beside the other. Only the extras that exist to bring TensorFlow name it."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    bringing = {
        group
        for group, lines in project["optional-dependencies"].items()
        if any(Requirement(line).name in ("tensorflow", "tensorflow-cpu") for line in lines)
    }
    assert "tensorflow" not in _requirements() and bringing == {"tensorflow", "tftrt"}
    tensorflow = _requirements("tensorflow")["tensorflow"].specifier
    assert Version("2.17.1") in tensorflow and Version("2.21.0") in tensorflow
    assert _requirements("tftrt")["tensorflow"].specifier.contains("2.17.1")
    assert not _requirements("tftrt")["tensorflow"].specifier.contains("2.18.0")


def test_the_range_takes_numpy_2_and_python_3_13() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    from packaging.specifiers import SpecifierSet

    assert Version("3.13.0") in SpecifierSet(project["requires-python"])
    assert Version("2.4.6") in _requirements()["numpy"].specifier
    # Serving installs on every Python of the range: no requirement pins NumPy below 2 (PyTriton's
    # wheel, which does, is installed without its dependencies, by the step the Makefile runs).
    assert "nvidia-pytriton" not in _requirements("serve")
    for requirement in _requirements("serve").values():
        assert requirement.marker is None, requirement
    makefile = (PYPROJECT.parent / "Makefile").read_text()
    assert f"TRITON_WHEEL := {TRITON_WHEEL}\n" in makefile
    assert '--no-deps "$(TRITON_WHEEL)"' in makefile


@pytest.mark.slow
def test_installing_beside_tensorflow_cpu_2_21_keeps_it_and_numpy_2(tmp_path: Path) -> None:
    """What pip would install into a tensorflow-cpu 2.21 environment (uv's resolver, against
    PyPI), serving included: no second TensorFlow distribution, NumPy and Keras left as 2.21 has
    them; and Triton's wheel, installed without its dependencies, installs nothing else."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        pytest.skip("uv is not installed beside this interpreter (make install brings it)")
    requirements = tmp_path / "requirements.in"
    repository = PYPROJECT.parent
    requirements.write_text(f"tensorflow-cpu==2.21.*\n-e {repository}[cpu,openvino,serve]\n")
    done = subprocess.run(
        [uv, "pip", "compile", "--quiet", "--python-version", "3.11", str(requirements)],
        capture_output=True, text=True, timeout=300, cwd=repository,
    )  # one call # fmt: skip
    if done.returncode != 0 and "Failed to fetch" in done.stderr:
        pytest.skip(f"PyPI is not reachable: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    pins = dict(
        line.split("==", 1) for line in done.stdout.splitlines() if "==" in line and line[0] != " "
    )
    assert pins["tensorflow-cpu"].startswith("2.21.") and "tensorflow" not in pins
    assert Version(pins["numpy"]) >= Version("2") and Version(pins["keras"]) >= Version("3.12")
    assert "tritonclient" in pins and "mlcommons-loadgen" in pins
    done = subprocess.run(
        [uv, "pip", "install", "--dry-run", "--python", sys.executable, "--no-deps",
         "--reinstall-package", "nvidia-pytriton", TRITON_WHEEL],
        capture_output=True, text=True, timeout=300, cwd=repository,
    )  # one call # fmt: skip
    assert done.returncode == 0, done.stderr
    changes = [line.split()[1] for line in done.stderr.splitlines() if line[:2] in (" +", " -")]
    assert set(changes) == {"nvidia-pytriton==0.7.0"}, done.stderr
