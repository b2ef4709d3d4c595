"""The native model a shadow check compares against: the SavedModel the artifact's manifest
names, checked before anything loads, and the check built for it."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from trtconv.core.errors import UsageError
from trtconv.model.keras_files import CUSTOM_OBJECTS
from trtconv.model.savedmodel import saved_model_for
from trtconv.options.serve import ServeOptions
from trtconv.serving.server.served_from import ServedFrom
from trtconv.serving.server.shadow.capture import capture_file
from trtconv.serving.server.shadow.check import NativeModel, ShadowCheck
from trtconv.serving.server.shadow.judge import ShadowJudge

log = logging.getLogger(__name__)


def shadow_reference(source: ServedFrom, options: ServeOptions) -> Path:
    """The native model `--shadow` runs: the source model the artifact's manifest names.
    Raises UsageError (exit 2) for a SavedModel served natively (nothing to compare) and for a
    manifest whose source model is not here, naming it."""
    manifest = source.manifest
    if manifest is None:
        raise UsageError(
            f"--shadow compares an artifact with its native model; {options.model} is a "
            "SavedModel, served natively: there is nothing to compare it with."
        )
    named = manifest.source_model.get("path")
    if not named:
        raise UsageError(
            f"--shadow needs the native model {source.path}'s manifest names, and it names none "
            "(source_model.path)."
        )
    if not Path(named).exists():
        raise UsageError(
            f"--shadow needs the native model {source.path}'s manifest names, {named}, which "
            "does not exist here (converted on another machine, or moved): serve it where that "
            "model is, or without --shadow."
        )
    return Path(named)


@contextlib.contextmanager
def shadow_check(
    source: ServedFrom,
    options: ServeOptions,
    name: str,
    announce: Callable[[str], None],
) -> Iterator[ShadowCheck | None]:
    """The shadow check of this `serve` (None without --shadow), not yet started; its native
    SavedModel (exported for a Keras source) lives until the block ends."""
    if options.shadow is None:
        yield None
        return
    named = shadow_reference(source, options)
    manifest = source.manifest
    assert manifest is not None  # shadow_reference refuses a SavedModel
    needed = manifest.source_model.get(CUSTOM_OBJECTS, ())
    with saved_model_for(named, needed) as saved_model:
        # One intra-op thread: the check runs beside the served path, and with every thread
        # TensorFlow took 2.7-3.9 ms of CPU a shadowed sample of a MobileNetV2-size model, with
        # one 1.3 ms (BENCHMARKS.md). A fallback's admission is derived from this runner's
        # warm-up: the instances' native runners get their share of the threads, at least one.
        native = NativeModel(saved_model, 1, source.input_values, manifest.model_signature.name)
        capture = capture_file(options.shadow_capture, name) if options.shadow_capture else None
        judge = ShadowJudge(manifest, saved_model)
        if judge.note:
            log.warning("%s: %s; the live verdict too.", source.path, judge.note)
        check = ShadowCheck(judge, native, options.shadow, options.on_failing, capture, announce)
        try:
            yield check
        finally:
            check.stop()
