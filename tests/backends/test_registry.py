"""The registry is the one place a backend is known: every registered backend has a conversion
test and a row in doctor's table, and no module outside `trtconv/backends/` names one."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trtconv import api
from trtconv.backends import registry
from trtconv.backends.registry import Backend
from trtconv.cli import app
from trtconv.core.errors import UsageError
from trtconv.core.precision import PRECISIONS

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = Path(registry.__file__).resolve().parents[1]


def converted_in_tests() -> set[str]:
    """Backends named by a `@pytest.mark.converts("NAME")` anywhere under tests/."""
    names = set()
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "converts"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(str(node.args[0].value))
    return names


def test_every_converter_has_a_conversion_test() -> None:
    """After Optimum's test_all_models_tested: a new backend comes with its conversion test."""
    missing = {b.name for b in registry.converters()} - converted_in_tests()
    assert not missing, f"no @pytest.mark.converts test for {sorted(missing)}"


def test_every_converter_is_a_row_of_doctors_table() -> None:
    report = api.doctor(deep=False)
    rows = [(row.backend, row.precision) for row in report.conversions]
    assert rows == [(b.name, p) for b in registry.converters() for p in PRECISIONS]
    table = CliRunner().invoke(app, ["doctor", "--quick"])
    assert table.exit_code == 0
    lines = table.output.split("Conversions possible here", 1)[1].splitlines()
    for backend in registry.converters():
        assert any(line.strip("│ ").startswith(backend.name + " ") for line in lines), backend


def names_outside_backends() -> list[str]:
    """String literals equal to a registered backend's name in trtconv/ outside backends/."""
    names = {backend.name for backend in registry.backends()}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "backends") in path.parents:
            continue
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        for token in tokens:
            if token.type != tokenize.STRING or token.string.startswith(("f", "F")):
                continue
            if ast.literal_eval(token.string) in names:
                found.append(f"{path.relative_to(PACKAGE)}:{token.start[0]} {token.string}")
    return found


def test_no_backend_is_named_outside_its_package() -> None:
    """Shared code asks the record (needs_onnx, on_gpu, qdq_scheme, ...), never the name."""
    assert names_outside_backends() == []


def test_registering_twice_from_another_module_is_refused() -> None:
    ort = registry.get("ort")
    impostor = Backend(**{**ort.__dict__, "module": "somewhere.else"})
    with pytest.raises(UsageError, match=r"is registered by trtconv\.backends\.ort"):
        registry.register(impostor)
    assert registry.get("ort") is ort
    with pytest.raises(UsageError, match="cannot be called 'auto'"):
        registry.register(Backend(**{**ort.__dict__, "name": "auto", "module": "x"}))


def test_auto_order_is_data_on_the_records() -> None:
    ranked = sorted(
        (b for b in registry.converters() if b.auto_rank is not None),
        key=lambda b: b.auto_rank or 0,
    )
    assert [b.name for b in ranked] == ["tftrt", "trt", "ort", "openvino"]
    assert registry.backend_choices()[0] == "auto"


def test_worker_processes_get_run_time_registrations() -> None:
    assert registry.worker_environment() == {}  # builtins need nothing
    from tests.helpers import reference_backend

    registry.register(reference_backend.BACKEND)
    try:
        env = registry.worker_environment()
        assert env[registry.PLUGINS_VARIABLE] == "tests.helpers.reference_backend"
        assert str(ROOT) in env["PYTHONPATH"].split(":")
    finally:
        registry.unregister(reference_backend.NAME)


def test_an_artifact_of_an_unknown_backend_is_bad_input(tmp_path: Path) -> None:
    from trtconv.artifact.manifest import Manifest, write_manifest
    from trtconv.bench.models import artifact_entry
    from trtconv.core.errors import InputError

    signature = {"inputs": [], "outputs": []}
    write_manifest(
        tmp_path,
        Manifest(
            backend="tensorflow-lite",
            precision="fp32",
            payload="m.tflite",
            source_model={},
            signature=signature,
            device={},
            tools={},
            conversion_seconds=0,
        ),
    )
    (tmp_path / "m.tflite").write_bytes(b"")
    for opening in (registry.open_runner, artifact_entry):
        with pytest.raises(InputError, match="backend 'tensorflow-lite', which this trtconv does"):
            opening(tmp_path)
