"""The backend registry: one record per backend, declared by the backend's own package.

Everything that varies by backend is a field of its `Backend` record, and the rest of trtconv
(conversion, doctor, bench, release) reads the records: a new backend is a new package under
`trtconv/backends/` plus its line in `BUILTIN`. Backends outside this package register from a
module named in $TRTCONV_BACKENDS (comma-separated), which worker processes import too.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from trtconv.artifact.manifest import Manifest, read_manifest
from trtconv.core.errors import InputError, UsageError
from trtconv.core.precision import PRECISIONS
from trtconv.facts import Facts, probe
from trtconv.model.paths import model_kind, saved_model_in
from trtconv.protocol.doctor_section import DoctorSection
from trtconv.protocol.request import ConversionOutcome, ConversionRequest
from trtconv.protocol.runner import Runner, RunnerFactory, RunOptions
from trtconv.protocol.serving import TritonServing
from trtconv.protocol.support import Support

# One line per backend shipped with trtconv; importing the package registers its record.
BUILTIN = (
    "trtconv.backends.tf_native",
    "trtconv.backends.tftrt",
    "trtconv.backends.trt",
    "trtconv.backends.ort",
    "trtconv.backends.openvino",
)
PLUGINS_VARIABLE = "TRTCONV_BACKENDS"
AUTO = "auto"
BEST = "best"  # convert --backend best: every backend, the fastest validated artifact wins


@dataclass(frozen=True)
class Backend:
    """One backend: what it needs, what it can do, and how it converts and runs models."""

    name: str
    library: str  # the module its runner imports (a worker imports it before timing the load)
    precisions: tuple[str, ...]
    support: Callable[[Facts, str], Support]  # (facts, precision) -> can it run here, and why
    runner: RunnerFactory  # (payload, manifest, options) -> Runner, not yet activated
    module: str  # the module whose import registers this record (for worker processes)
    # None: the native runner of SavedModels (the baseline), which converts nothing.
    convert: Callable[[ConversionRequest], ConversionOutcome] | None = None
    needs_onnx: bool = False  # its request carries the validated ONNX export
    # Takes tf.string inputs: it keeps the TensorFlow graph (and its string ops) as it is.
    string_inputs: bool = False
    qdq_scheme: str | None = None  # int8 from an explicit Q/DQ model in this scheme
    on_gpu: bool = False  # runs on a GPU (the bench judges its timing stability by GPU rules)
    throughput_mode: bool = False  # its runner honours RunOptions.throughput
    # Distributions it needs beyond trtconv's own (their versions go into facts and manifests).
    packages: tuple[str, ...] = ()
    auto_rank: int | None = None  # place in `--backend auto`'s order (lowest first); None: never
    # The section this backend adds to `trtconv doctor`'s report.
    doctor: Callable[[Facts], DoctorSection] | None = None
    # How Triton serves its payloads natively (`trtconv deploy`); None: it cannot.
    triton: TritonServing | None = None


_REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Add `backend` (replacing a record of the same name from the same module); return it.

    Raises UsageError when another module already registered that name or a precision is unknown.
    """
    existing = _REGISTRY.get(backend.name)
    if existing is not None and existing.module != backend.module:
        raise UsageError(
            f"Backend '{backend.name}' is registered by {existing.module}; {backend.module} "
            "cannot register it again."
        )
    if backend.name in (AUTO, BEST):
        raise UsageError(
            f"A backend cannot be called '{backend.name}': --backend {backend.name} chooses one."
        )
    unknown = [p for p in backend.precisions if p not in PRECISIONS]
    if unknown:
        raise UsageError(f"Backend '{backend.name}' declares unknown precisions {unknown}.")
    _REGISTRY[backend.name] = backend
    return backend


def declared_packages() -> tuple[str, ...]:
    """The distributions the registered backends need beyond trtconv's own (Backend.packages):
    facts and manifests record their versions."""
    return tuple(dict.fromkeys(name for backend in backends() for name in backend.packages))


def facts_here(deep: bool = False) -> Facts:
    """This machine's facts (facts.probe, cached), with the registered backends' packages."""
    return probe(deep, declared_packages())


def unregister(name: str) -> None:
    """Remove a backend registered at run time (tests); unknown names are ignored."""
    _REGISTRY.pop(name, None)


@functools.cache
def _import_backends() -> None:
    """Import (once) the builtin backends and those $TRTCONV_BACKENDS names: each registers."""
    extra = [m.strip() for m in os.environ.get(PLUGINS_VARIABLE, "").split(",") if m.strip()]
    for module in (*BUILTIN, *extra):
        importlib.import_module(module)


def _load() -> dict[str, Backend]:
    _import_backends()
    return _REGISTRY


def backends() -> list[Backend]:
    """Every registered backend: the builtins in `BUILTIN` order, then the others as registered
    (whatever order modules happened to be imported in)."""
    registered = list(_load().values())

    def place(backend: Backend) -> tuple[int, int]:
        builtin = BUILTIN.index(backend.module) if backend.module in BUILTIN else len(BUILTIN)
        return builtin, registered.index(backend)

    return sorted(registered, key=place)


def get(name: str) -> Backend:
    """The record of backend `name`. Raises UsageError for an unknown name."""
    registry = _load()
    if name not in registry:
        raise UsageError(f"Unknown backend '{name}'; known: {', '.join(registry)}.")
    return registry[name]


def converters() -> list[Backend]:
    """The backends that convert SavedModels (every one but the native runner)."""
    return [backend for backend in backends() if backend.convert is not None]


def backend_choices() -> tuple[str, ...]:
    """What `--backend` and a release target's `backend` accept: auto, best, then every
    converter."""
    return (AUTO, BEST, *(backend.name for backend in converters()))


def native() -> Backend:
    """The backend that runs SavedModels as they are (the baseline of every comparison)."""
    return next(backend for backend in backends() if backend.convert is None)


def support(name: str, precision: str, facts: Facts | None = None) -> Support:
    """Whether converter `name` can convert and run `precision` on the machine `facts` describe
    (this one by default). Raises UsageError for an unknown backend or precision."""
    backend = get(name)
    if backend.convert is None:
        raise UsageError(f"Backend '{name}' runs SavedModels as they are; it converts nothing.")
    if precision not in PRECISIONS:
        raise UsageError(f"Unknown precision '{precision}'; choose one of {', '.join(PRECISIONS)}.")
    facts = facts or facts_here()
    if precision not in backend.precisions:
        choices = ", ".join(backend.precisions)
        return Support(
            name, precision, False, f"{name} has no {precision} mode", f"--precision {choices}"
        )
    return backend.support(facts, precision)


def support_matrix(facts: Facts | None = None) -> list[Support]:
    """Every converter x precision with its verdict, for `doctor`."""
    facts = facts or facts_here()
    return [support(b.name, p, facts) for b in converters() for p in PRECISIONS]


@dataclass(frozen=True)
class Choice:
    """What `--backend auto` chose: the backend, one short line why, and the backends passed
    over with their full reasons (for --json and doctor, not for every convert's output)."""

    backend: str
    reason: str
    passed_over: tuple[str, ...] = ()

    @property
    def details(self) -> str:
        """The reason with every backend passed over and why."""
        return self.reason + (f"; not {', '.join(self.passed_over)}" if self.passed_over else "")


def auto_choice(precision: str, facts: Facts | None = None, cannot: tuple[str, ...] = ()) -> Choice:
    """`--backend auto`: the first backend in `auto_rank` order that can run `precision` here
    (not one that only converts it for another machine: Support.runs_here), leaving out the
    backends `cannot` names (they could not take this model: `convert` tries the next).

    When none can, the first whose libraries are present (one that runs fp32), so that its
    refusal is then reported (exit 3) instead of a silent downgrade.
    """
    facts = facts or facts_here()
    ranked = sorted(
        (b for b in converters() if b.auto_rank is not None and b.name not in cannot),
        key=lambda b: b.auto_rank or 0,
    )
    if not ranked:
        return Choice("", f"no other backend can run {precision} here")
    refusals: list[str] = []
    for backend in ranked:
        verdict = support(backend.name, precision, facts)
        if verdict.ok and verdict.runs_here:
            names = [refusal.split(" ", 1)[0] for refusal in refusals]
            skipped = f"; {', '.join(names)} cannot here (--json says why)" if names else ""
            return Choice(backend.name, f"auto: {verdict.reason}{skipped}", tuple(refusals))
        refusals.append(f"{backend.name} ({verdict.reason})")
    usable = [b.name for b in ranked if support(b.name, "fp32", facts).ok]
    fallback = usable[0] if usable else ranked[-1].name
    return Choice(fallback, f"no backend can run {precision} here", tuple(refusals))


def next_auto(precision: str, cannot: tuple[str, ...]) -> str | None:
    """The backend `--backend auto` tries once those `cannot` names could not take the model:
    the next that runs `precision` here, None when none is left."""
    choice = auto_choice(precision, cannot=cannot)
    verdict = support(choice.backend, precision) if choice.backend else None
    return choice.backend if verdict is not None and verdict.ok and verdict.runs_here else None


def converting_without_onnx(precision: str, facts: Facts | None = None) -> list[str]:
    """The backends that convert `precision` here from the SavedModel itself (no ONNX export):
    what a failed export names."""
    facts = facts or facts_here()
    return [
        b.name
        for b in converters()
        if not b.needs_onnx
        and support(b.name, precision, facts).ok
        and support(b.name, precision, facts).runs_here
    ]


def choose(precision: str, facts: Facts | None = None) -> tuple[str, str]:
    """(backend, reason with every refusal) for `--backend auto` (see `auto_choice`)."""
    choice = auto_choice(precision, facts)
    return choice.backend, choice.details


def open_runner(
    path: Path, options: RunOptions | None = None, manifest: Manifest | None = None
) -> Runner:
    """A runner (not yet activated) for a SavedModel directory or a trtconv artifact directory.

    An artifact's recorded run options (`conversion_summary.run_options`, e.g. the throughput
    mode `--backend best` chose) apply unless `options` asks for more. `manifest`: the
    artifact's, already read (a caller that reads it once and hands it down); None reads it.
    Raises UsageError when `path` does not exist and InputError when it is neither.
    """

    path = saved_model_in(Path(path))
    options = options or RunOptions()
    if manifest is not None or model_kind(path) == "artifact":
        manifest = manifest or read_manifest(path)
        backend = artifact_backend(manifest.backend, path)
        recorded = manifest.conversion_summary.get("run_options") or {}
        if recorded.get("throughput"):
            options = replace(options, throughput=True)
        return backend.runner(path / manifest.payload, manifest, options)
    return native().runner(path, None, options)


def artifact_backend(name: str, artifact: Path) -> Backend:
    """The backend an artifact's manifest names. Raises InputError when none is registered."""
    registry = _load()
    if name not in registry:
        known = ", ".join(registry)
        raise InputError(
            f"Artifact {artifact} was made by backend '{name}', which this trtconv does not know "
            f"(known: {known})."
        )
    return registry[name]


def worker_environment() -> dict[str, str]:
    """Environment variables that make a fresh Python process register the same backends.

    Backends registered at run time (not builtin) are named in $TRTCONV_BACKENDS, and the folder
    their module is imported from goes onto PYTHONPATH.
    """
    extra = [b.module for b in backends() if b.module not in BUILTIN]
    if not extra:
        return {}
    roots = [_import_root(module) for module in extra]
    paths = [*dict.fromkeys(r for r in roots if r), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {PLUGINS_VARIABLE: ",".join(dict.fromkeys(extra)), "PYTHONPATH": os.pathsep.join(paths)}


def _import_root(module: str) -> str:
    """The sys.path entry `module` was imported from ("" when unknown)."""
    loaded = sys.modules.get(module)
    file = getattr(loaded, "__file__", None)
    if not file:
        return ""
    root = Path(file).resolve().parent
    depth = module.count(".") + (1 if Path(file).name == "__init__.py" else 0)
    for _ in range(depth):
        root = root.parent
    return str(root)
