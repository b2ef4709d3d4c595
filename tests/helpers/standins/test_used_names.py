"""Every TensorRT name trtconv uses exists in every TensorRT version trtconv supports.

The names are read from trtconv's source (the modules that import `tensorrt`), so a new call is
checked the day it is written, on the error paths too, which no stand-in test may reach:
- `trt.X` and `trt.X.Y`: a module name, and a member of that class or enum;
- `builder.x`, `self._engine.x`, `network.get_layer(i).x`, `trt.Runtime(logger).x`: a member of
  the class the receiver holds (RECEIVERS below, and what a few calls return);
- `getattr(receiver, "x", default)`: an attribute some versions lack; within one function, at
  least one of those asked of a receiver must exist (device_memory_size_v2 or its 10.0 name);
- the BuilderFlag names of each build plan, on the versions of its major.

The versions are the generated name lists (SUPPORTED_TRT: the floors of the `trt` and `trt-cu12`
extras, the last 10, the first and newest 11), read from the real bindings wheels.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trtconv.backends.trt import builder as trt_builder

from . import SUPPORTED_TRT
from .tensorrt_api import trt_names

ROOT = Path(__file__).parents[3] / "trtconv"
# The variable names trtconv gives TensorRT objects -> their class.
RECEIVERS = {
    "builder": "Builder",
    "config": "IBuilderConfig",
    "network": "INetworkDefinition",
    "parser": "OnnxParser",
    "profile": "IOptimizationProfile",
    "cache": "ITimingCache",
    "tensor": "ITensor",
    "_engine": "ICudaEngine",
    "engine": "ICudaEngine",
    "_context": "IExecutionContext",
    "logger": "ILogger",
}
# method -> the class of what it returns, for chained calls (network.get_layer(i).type).
RETURNS = {
    "get_layer": "ILayer",
    "get_input": "ITensor",
    "get_output": "ITensor",
    "get_error": "ParserError",
    "deserialize_cuda_engine": "ICudaEngine",
    "create_execution_context": "IExecutionContext",
    "create_builder_config": "IBuilderConfig",
    "create_network": "INetworkDefinition",
    "create_optimization_profile": "IOptimizationProfile",
    "create_timing_cache": "ITimingCache",
}


def tensorrt_modules() -> list[Path]:
    """trtconv's modules that import the `tensorrt` module (through `require`)."""
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if re.search(r"""require\(["']tensorrt["']\)|import tensorrt\b""", path.read_text())
    )


def receiver_class(node: ast.expr) -> str | None:
    """The TensorRT class `node` evaluates to, when trtconv's naming says so."""
    if isinstance(node, ast.Name):
        return RECEIVERS.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == "self":
            return RECEIVERS.get(node.attr)
        if node.value.id == "trt":
            return None  # trt.X is a module name, checked on its own
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if isinstance(node.func.value, ast.Name) and node.func.value.id == "trt":
            return node.func.attr  # trt.Runtime(logger) is a Runtime
        return RETURNS.get(node.func.attr)
    return None


def uses(tree: ast.AST) -> Iterator[tuple[str, str]]:
    """(owner, name) of each TensorRT name used: owner "" for the module, a class or enum."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id == "trt":
            yield "", node.attr
        elif isinstance(value, ast.Attribute) and ast.unparse(value.value) == "trt":
            yield value.attr, node.attr
        else:
            owner = receiver_class(value)
            if owner:
                yield owner, node.attr


def guarded(tree: ast.AST) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(owner, alternatives): the names each function asks of one receiver with getattr."""
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        asked: dict[str, list[str]] = {}
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                owner = receiver_class(node.args[0])
                if owner:
                    asked.setdefault(owner, []).append(node.args[1].value)
        for owner, names in asked.items():
            yield owner, tuple(names)


def exists(table: dict[str, Any], owner: str, name: str) -> bool:
    if not owner:
        return name in table["module"]
    return name in table["classes"].get(owner, {}) or name in table["enums"].get(owner, {})


def test_the_modules_that_use_tensorrt_are_found() -> None:
    found = {path.relative_to(ROOT).as_posix() for path in tensorrt_modules()}
    assert {"backends/trt/converter.py", "backends/trt/runner.py"} <= found, found


@pytest.mark.parametrize("version", SUPPORTED_TRT)
def test_every_tensorrt_name_trtconv_uses_exists(version: str) -> None:
    table = trt_names(version)
    missing, checked = [], 0
    for path in [*tensorrt_modules(), ROOT / "backends/trt/builder.py"]:
        tree = ast.parse(path.read_text())
        for owner, name in set(uses(tree)):
            checked += 1
            if not exists(table, owner, name):
                missing.append(f"{path.name}: {owner or 'tensorrt'}.{name}")
        for owner, names in guarded(tree):
            if not any(exists(table, owner, name) for name in names):
                missing.append(f"{path.name}: {owner} has none of {names}")
    assert checked > 30  # the scan found trtconv's calls
    assert not missing, f"TensorRT {table['source']['version']} lacks {sorted(missing)}"


@pytest.mark.parametrize("version", SUPPORTED_TRT)
def test_every_build_plan_flag_exists(version: str) -> None:
    table = trt_names(version)
    major = int(version.split(".")[0])
    for precision in ("fp32", "tf32", "fp16", "int8"):
        plan = trt_builder.build_plan(major, precision)
        for flag in (*plan.set_flags, *plan.clear_flags):
            assert flag in table["enums"]["BuilderFlag"], (version, precision, flag)
