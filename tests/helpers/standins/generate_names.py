"""Record the names a real TensorRT Python binding defines, by importing it without TensorRT.

    .venv/bin/python tests/helpers/standins/generate_names.py            # every version below
    .venv/bin/python tests/helpers/standins/generate_names.py 11.4 10.0  # some of them
    ... --find-links DIR   # take the wheels from DIR (pip's --find-links) as well as from PyPI

For each version it
1. installs the bindings wheel (`tensorrt-cu13-bindings`, `-cu12-` for 10.0 which predates CUDA
   13: a 1-2 MB wheel of pybind11 bindings, on PyPI) into a temporary folder with
   `pip install --no-deps --only-binary=:all: --target`, for the running Python;
2. builds stub C libraries with gcc: one per TensorRT soname the extension needs (`readelf -d`:
   libnvinfer.so.N, libnvinfer_plugin.so.N, libnvonnxparser.so.N), each defining every C entry
   point the extension imports from them (`nm -D --undefined-only`) as a function returning 0.
   The extension then loads, and every factory (`trt.Builder(logger)`, `trt.Runtime(logger)`)
   returns nullptr, which pybind11 turns into a TypeError: names only, no behaviour;
3. imports the module in a subprocess, as `import tensorrt` sees it (the `tensorrt` package is
   `from tensorrt_bindings import *` plus `__version__`), and dumps its public names:
   the module's names, each class's own and inherited attributes with the parameter names of
   each method (read from pybind11's signatures), each enum's members and values;
4. writes them to `names/tensorrt-MAJOR.MINOR.json`, which the strict stand-ins
   (`tensorrt_api.py`) load and the tests check trtconv against.

Needs the network (PyPI) or --find-links, gcc and binutils (readelf, nm). The tests never run
this: the generated lists are committed. Nothing of TensorRT is copied into the repository, only
the names and enum values it exposes.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

NAMES = Path(__file__).parent / "names"
# MAJOR.MINOR -> the bindings wheel that stands for it. The floors of trtconv's extras (10.0 for
# `trt-cu12`, 10.13 for `trt`), the last 10.x, the first and the newest 11.x.
WHEELS = {
    "10.0": "tensorrt-cu12-bindings==10.0.1",
    "10.13": "tensorrt-cu13-bindings==10.13.2.6",
    "10.16": "tensorrt-cu13-bindings==10.16.1.11",
    "11.0": "tensorrt-cu13-bindings==11.0.0.114",
    "11.4": "tensorrt-cu13-bindings==11.4.0.106",
}
# What pybind11 adds to every class: not part of TensorRT's API.
PYBIND11 = re.compile(r"^(__pybind11_module_local_.*|_pybind11_conduit_v1_|__dict__|__weakref__)$")
BOOKKEEPING = ("__doc__", "__module__")
SYSTEM_LIBRARIES = re.compile(r"^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux)")


# --- in this process: install, stub, run the dump --------------------------------------------


def install(requirement: str, target: Path, find_links: list[str]) -> Path:
    """pip-install the wheel into `target`; returns the wheel file pip used (for its hash)."""
    wheels = target.parent / "wheels"
    links = [arg for folder in find_links for arg in ("--find-links", folder)]
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    common = ["--no-deps", "--only-binary=:all:", *links]
    subprocess.run([*pip, "download", *common, "-d", str(wheels), requirement], check=True)
    (wheel,) = wheels.glob("*.whl")
    subprocess.run([*pip, "install", *common, "--target", str(target), str(wheel)], check=True)
    return wheel


def extension(site: Path) -> Path:
    """The bindings' compiled extension module (tensorrt_bindings/tensorrt*.so)."""
    (found,) = (site / "tensorrt_bindings").glob("tensorrt*.so")
    return found


def tool_lines(*command: str) -> list[str]:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()


def build_stubs(module: Path, folder: Path) -> list[str]:
    """Stub libraries for the TensorRT sonames `module` needs, in `folder`; returns the sonames.

    Every undefined, unversioned, non-Python symbol becomes `void *NAME(void) { return 0; }`: on
    x86-64 a caller passing arguments to it is harmless, and 0 is nullptr or false."""
    needed = [
        line.split("[", 1)[1].rstrip("]")
        for line in tool_lines("readelf", "-d", str(module))
        if "(NEEDED)" in line
    ]
    sonames = [name for name in needed if not SYSTEM_LIBRARIES.match(name)]
    undefined = [line.split() for line in tool_lines("nm", "-D", "--undefined-only", str(module))]
    symbols = sorted(
        parts[1]
        for parts in undefined
        # Versioned symbols (memcpy@GLIBC_2.14) and Python's and dlopen's are there already.
        if len(parts) == 2 and parts[0] == "U" and "@" not in parts[1]
        if not parts[1].startswith(("Py", "_Py", "dl"))
    )
    source = folder / "stub.c"
    source.write_text("".join(f"void *{name}(void) {{ return 0; }}\n" for name in symbols))
    for soname in sonames:
        output = ["-o", str(folder / soname), str(source)]
        subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", *output], check=True)
    return sonames


def generate(version: str, requirement: str, find_links: list[str]) -> dict[str, Any]:
    """The name table of one TensorRT version, from its real bindings wheel."""
    with tempfile.TemporaryDirectory(prefix="trtconv-names-") as work:
        site, stubs = Path(work) / "site", Path(work) / "stubs"
        stubs.mkdir()
        wheel = install(requirement, site, find_links)
        sonames = build_stubs(extension(site), stubs)
        env = dict(os.environ, PYTHONPATH=str(site), LD_LIBRARY_PATH=str(stubs))
        done = subprocess.run(
            [sys.executable, __file__, "--dump"], capture_output=True, text=True, env=env
        )
        if done.returncode:
            raise RuntimeError(f"importing {requirement} failed:\n{done.stderr}")
        table = json.loads(done.stdout)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if not table["version"].startswith(f"{version}."):
        raise RuntimeError(f"{requirement} is TensorRT {table['version']}, not {version}")
    source = {
        "package": requirement.split("==")[0],
        "version": table.pop("version"),
        "wheel": wheel.name,
        "sha256": digest,
        "stubbed_libraries": sonames,
        "generated_by": "tests/helpers/standins/generate_names.py",
    }
    return {"source": source, **table}


# --- in the subprocess: import and dump --------------------------------------------------------


def parameters(function: Any) -> list[str]:
    """Parameter names of a function (every overload's, in order, without `self`): read from
    pybind11's signature lines in the docstring, else asked of `inspect` (Python functions)."""
    names: list[str] = []
    signed = False
    name = getattr(function, "__name__", "")
    for line in (function.__doc__ or "").splitlines():
        match = re.match(rf"^(?:\d+\. )?{re.escape(name)}\((.*)\) ->", line.strip())
        if not match or match.group(1) == "*args, **kwargs":
            continue
        signed = True
        for argument in split_arguments(match.group(1)):
            parameter = re.split(r"[:=]", argument, maxsplit=1)[0].strip()
            # Not names: `self`, the `/` and `*` markers, *args and **kwargs.
            if parameter.isidentifier() and parameter != "self" and parameter not in names:
                names.append(parameter)
    if signed:
        return names
    try:
        found = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p.name for p in found if p.name != "self" and p.kind not in variadic]


def split_arguments(text: str) -> list[str]:
    """`a: List[int] = [1, 2], b: str` -> ["a: List[int] = [1, 2]", "b: str"]."""
    parts, depth, current, quote = [], 0, "", ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    return [*parts, current] if current.strip() else parts


def is_enum(value: Any) -> bool:
    return isinstance(value, type) and isinstance(getattr(value, "__members__", None), dict)


def members(cls: type, own_module: str) -> dict[str, list[str]]:
    """Attribute name -> parameter names ([] for data and properties), of `cls` and of the bases
    it inherits from the bindings (Logger has ILogger's `log`)."""
    found: dict[str, list[str]] = {}
    for base in cls.__mro__:
        if base.__module__ != own_module:
            continue
        for name, value in vars(base).items():
            private = name.startswith("_") and not name.endswith("__")  # pybind11's __entries
            if PYBIND11.match(name) or private or name in found or name in BOOKKEEPING:
                continue
            if is_enum(cls) and name in cls.__members__:
                continue
            plain = isinstance(value, (property, type)) or not callable(value)
            found[name] = [] if plain else parameters(value)
    return dict(sorted(found.items()))


def types_of(module: types.ModuleType, own: str) -> dict[str, type]:
    """Qualified name -> class of every class and enum the bindings define, nested ones
    (ILogger.Severity) where they are defined, not under their aliases (Logger.Severity)."""
    found: dict[str, type] = {}
    pending = [(name, value) for name, value in vars(module).items() if isinstance(value, type)]
    while pending:
        name, cls = pending.pop()
        if name in found or cls.__module__ != own:
            continue
        found[name] = cls
        pending += [
            (f"{name}.{n}", v)
            for n, v in vars(cls).items()
            if isinstance(v, type) and v.__qualname__ == f"{cls.__qualname__}.{n}"
        ]
    return found


def dump() -> None:
    """Print the name table of the `tensorrt` module importable here (see the module docstring).

    `classes` holds every class's members and, for an enum, only what it adds to what every
    pybind11 enum has (DataType.itemsize); `enums` holds each enum's members and values."""
    import tensorrt_bindings

    module = types.ModuleType("tensorrt")
    # What the `tensorrt` package's __init__ does: a star import and the version.
    exec("from tensorrt_bindings import *\nfrom tensorrt_bindings import __version__", vars(module))
    own = tensorrt_bindings.tensorrt.__name__
    found = types_of(module, own)
    tables = {name: members(cls, own) for name, cls in found.items()}
    enum_names = [name for name, cls in found.items() if is_enum(cls)]
    protocol = set.intersection(*(set(tables[name]) for name in enum_names))
    classes = {
        name: {k: v for k, v in table.items() if name not in enum_names or k not in protocol}
        for name, table in tables.items()
    }
    enums = {
        name: {member: int(value) for member, value in found[name].__members__.items()}
        for name in enum_names
    }
    functions = {
        name: parameters(value)
        for name, value in vars(module).items()
        if callable(value) and not isinstance(value, type) and not name.startswith("_")
    }
    table = {
        "version": module.__version__,
        "module": sorted(n for n in vars(module) if not n.startswith("_") or n == "__version__"),
        "functions": dict(sorted(functions.items())),
        "classes": {name: table for name, table in sorted(classes.items()) if table},
        "enums": dict(sorted(enums.items())),
    }
    json.dump(table, sys.stdout)


def dumps(table: dict[str, Any]) -> str:
    """JSON with one line per member: lists of names on one line (a reviewable diff)."""
    text = json.dumps(table, indent=1)
    names_list = r"\[\s*((?:\"[^\"]*\",?\s*)*)\]"
    return re.sub(names_list, lambda m: json.dumps(json.loads(m.group())), text) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", help=f"MAJOR.MINOR, default: {list(WHEELS)}")
    parser.add_argument("--find-links", action="append", default=[], help="a folder of wheels")
    parser.add_argument("--dump", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump:
        dump()
        return
    for version in args.versions or list(WHEELS):
        table = generate(version, WHEELS[version], args.find_links)
        path = NAMES / f"tensorrt-{version}.json"
        path.write_text(dumps(table))
        print(f"{path}: {table['source']['wheel']}, {len(table['classes'])} classes")


if __name__ == "__main__":
    main()
