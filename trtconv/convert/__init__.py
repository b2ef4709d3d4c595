"""`convert`: SavedModel -> validated artifact (manifest.json + payload), written atomically.

`plan` decides (backend, precision, output) before any work; `data` reads the held-out,
calibration and search data once; `workspace` converts into a directory and validates what it
wrote; `single` is convert with one backend, `best` with every backend that runs here, keeping the
fastest that passes validation (`tournament` holds the rules of that decision).
"""

from __future__ import annotations

from dataclasses import replace

from trtconv.backends import registry
from trtconv.convert.best import convert_best
from trtconv.convert.convert_result import ConvertResult
from trtconv.convert.plan import check_options, fit_to_model
from trtconv.convert.single import convert_single
from trtconv.core.progress import Progress
from trtconv.model.paths import saved_model_in
from trtconv.model.savedmodel import saved_model_for
from trtconv.options.convert import ConvertOptions


def convert(options: ConvertOptions, progress: Progress | None = None) -> ConvertResult:
    """Convert `options.saved_model` (a SavedModel, a `trtconv train` output or a Keras file)
    into a validated artifact directory; `progress(done, total, label)` hears about each step.

    Raises UsageError (2), InputError (1), MissingDependencyError (3), ConversionError (1), each
    before anything is written except ConversionError; and AccuracyError (4) when validation
    fails or leaves an output not judged, after writing the artifact with its manifest status:
    the error carries the whole result.
    """
    check_options(options)
    # A Keras file is exported to a SavedModel for this conversion, and a SavedModel TensorFlow
    # cannot revive is converted from its signature graphs: the manifest names the user's model.
    with saved_model_for(options.saved_model, options.custom_objects) as saved_model:
        source = None if saved_model == saved_model_in(options.saved_model) else options.saved_model
        options, signature = fit_to_model(replace(options, saved_model=saved_model))
        if options.backend == registry.BEST:
            return convert_best(options, signature, progress, source)
        return convert_single(options, signature, progress, source)


__all__ = ["ConvertResult", "convert"]
