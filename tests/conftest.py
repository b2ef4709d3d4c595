"""Shared fixtures (a real digits-cnn SavedModel trained once and cached), the quick tier and the
serial marker (tests/helpers/tiers.py), and GPU skips."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import model_cache, tiers
from tests.helpers.model_cache import cached_build, caching_export, exports_dir

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# OpenVINO's and NNCF's telemetry send each event from a forked child that waits on the network
# (here closed): measured, tests/backends/test_openvino.py took 38 s instead of 16 s. Both turn it
# off where CI is "true" (openvino_telemetry's `disable_in_ci`), their only switch that writes
# nothing to the user's home; every test process and its children inherit it.
os.environ["CI"] = "true"

DIGITS_EPOCHS = 12


def pytest_addoption(parser: pytest.Parser) -> None:
    tiers.add_option(parser)


def pytest_configure(config: pytest.Config) -> None:
    model_cache.configure(config)  # before pytest-xdist starts its workers: they inherit it


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return tiers.ignore_module(collection_path, config)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: it sees the `tensorflow` marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests unless an NVIDIA GPU is visible, and `no_gpu` tests when one is; mark
    and (with --quick) deselect the TensorFlow tests."""
    from trtconv.facts import probe_gpus

    tiers.mark_and_select(config, items)
    if probe_gpus():
        marker, why = "no_gpu", "expects a machine without an NVIDIA GPU (this one has one)"
    else:
        marker, why = "gpu", "needs an NVIDIA GPU with TensorRT (none on this machine)"
    skip = pytest.mark.skip(reason=why)
    for item in items:
        if item.get_closest_marker(marker) is not None:
            item.add_marker(skip)
    _skip_vnni_tests(items)
    _skip_no_cpu_fp16_tests(items)


def _skip_vnni_tests(items: list[pytest.Item]) -> None:
    """Skip `vnni` tests on an x86 CPU without VNNI: the int8 accuracy they assert is that of
    VNNI's int8 kernels (AVX2's saturate, and ONNX Runtime runs S8S8 partly in float there)."""
    from trtconv.quantize.isa import X86_NO_VNNI, this_cpu_int8_class

    if this_cpu_int8_class() != X86_NO_VNNI:
        return
    skip = pytest.mark.skip(reason="asserts int8 accuracy of VNNI kernels (this x86 CPU has none)")
    for item in items:
        if item.get_closest_marker("vnni") is not None:
            item.add_marker(skip)


def _skip_no_cpu_fp16_tests(items: list[pytest.Item]) -> None:
    """Skip `no_cpu_fp16` tests on a CPU with native float16 arithmetic: OpenVINO runs fp16
    there (Sapphire Rapids Xeons have AVX512-FP16), so fp16 is no longer refused on a CPU."""
    from trtconv.backends.openvino.rules import NATIVE_FEATURES
    from trtconv.facts import probe_cpu

    found = probe_cpu().features & set(NATIVE_FEATURES["fp16"])
    if not found:
        return
    why = f"expects a CPU without native float16; this one has {', '.join(sorted(found))}"
    for item in items:
        if item.get_closest_marker("no_cpu_fp16") is not None:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[pytest.CollectReport]:
    report = yield
    tiers.guard_collection(report, collector.config)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with tiers.run_lock(item):
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    tiers.note_before(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    report = yield
    tiers.guard(item, report)
    return report


@pytest.fixture(scope="session", autouse=True)
def _onnx_exports_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """Conversions take each SavedModel's tf2onnx export from tests/helpers/model_cache.py once made
    (tests/onnxlib/test_onnx_export.py and the SIGTERM tests still run tf2onnx itself)."""
    if tiers.quick(request.config):  # nothing in the quick tier exports
        yield
        return
    from trtconv.convert import workspace

    with pytest.MonkeyPatch.context() as patch:
        export = caching_export(exports_dir(), workspace.export_onnx)
        patch.setattr(workspace, "export_onnx", export)
        yield


@pytest.fixture(scope="session")
def digits_model_dir(request: pytest.FixtureRequest) -> Path:
    """A digits-cnn trained with AMP by trtconv itself: DIR/saved_model and DIR/trtconv.json.

    Trained once for all pytest-xdist workers and kept across runs
    (tests/helpers/model_cache.py)."""
    from trtconv import api

    def train(output: Path) -> None:
        api.train(api.TrainOptions(model="digits-cnn", output=output, epochs=DIGITS_EPOCHS))

    return cached_build(request.config, "digits", f"digits-cnn epochs={DIGITS_EPOCHS}", train)


@pytest.fixture(scope="session")
def digits_saved_model(digits_model_dir: Path) -> Path:
    return digits_model_dir / "saved_model"


@pytest.fixture(scope="session")
def digits_native(digits_saved_model: Path) -> Any:
    """The digits SavedModel loaded by TensorFlow once (activated SavedModelRunner)."""
    from trtconv.backends.tf_native import SavedModelRunner

    runner = SavedModelRunner(digits_saved_model)
    runner.activate()  # for the whole session: TensorFlow frees it at exit
    return runner


@pytest.fixture(scope="session")
def digits_held_out(digits_native: Any) -> Any:
    """The digits test split, fitted to the model's signature."""
    from trtconv.calib.readers import VALIDATION, read_model_data

    return read_model_data("digits", digits_native.signature, role=VALIDATION)


@pytest.fixture(scope="session")
def digits_reference(digits_native: Any, digits_held_out: Any) -> dict[str, Any]:
    """TensorFlow's outputs on the held-out digits."""
    from trtconv.outputs.compare import run_batched

    return run_batched(digits_native, digits_held_out)
