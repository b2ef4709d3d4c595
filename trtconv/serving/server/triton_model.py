"""The model Triton's Python backend runs for `trtconv serve`: trtconv's runner inside the
backend's own process (one per model instance), no proxy between them. Imported only there:
`triton_python_backend_utils` exists in that process alone. What it is told comes from the
settings file triton_process.py writes beside model.py. Tensors cross the backend's
boundary by DLPack, exact under NumPy 1 and 2 (tensor_crossing.py).

With a shadow check (`serve --shadow`) each answered request may be offered to it
(shadow/link.py: a draw and, when drawn, a copy; never a wait), and with `--on-failing
fallback` the instance also opens the native model, which serves every request once the check
says the live verdict is failing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trtconv.artifact.manifest import read_manifest
from trtconv.backends.registry import open_runner
from trtconv.model.paths import ARTIFACT, model_kind
from trtconv.protocol.runner import Runner, RunOptions
from trtconv.serving.repository.fixed_inputs import input_values_of, served
from trtconv.serving.server.batch_runner import Answer, Feeds, Traffic, infer_function, warm_up
from trtconv.serving.server.shadow.link import ShadowTap
from trtconv.serving.server.tensor_crossing import input_readers, output_makers
from trtconv.serving.server.triton_process import InstanceSettings

WARMUP_PARAMETER = "trtconv_warmup"  # a request parameter: the server's own warm-up, not counted
Infer = Callable[[Sequence[Feeds]], list[Answer]]


class TritonPythonModel:
    """Triton's Python-backend model: `initialize` opens and warms up the runner (before Triton
    marks the model ready), `execute` answers the batcher's requests, one response each (an
    error response for a request that failed alone), `finalize` records the traffic. The
    repository's model.py subclasses it, naming its settings file."""

    settings_file = ""

    def initialize(self, args: dict[str, str]) -> None:
        told = InstanceSettings.load(Path(self.settings_file))
        run = RunOptions(threads=told.threads, device=told.device, spin=False)
        path = Path(told.model)
        manifest = read_manifest(path) if model_kind(path) == ARTIFACT else None  # read once
        values = input_values_of(manifest)
        self.runners: list[Runner] = []
        model = served(self._opened(open_runner(path, run, manifest)), values)
        self.output_names = [spec.name for spec in model.signature.outputs]
        # How tensors cross the backend's boundary (tensor_crossing.py): by DLPack.
        self.readers = input_readers(model.signature)
        self.makers = output_makers(model.signature)
        self.traffic, self.warm_traffic = Traffic(), Traffic()
        self.infer = infer_function(model, told.batched, self.traffic)
        self.warm_infer = infer_function(model, told.batched, self.warm_traffic)
        self.record = Path(told.traffic) / f"{os.getpid()}.json"  # an instance's own process
        warm_up(model, told.largest, told.batched)
        self.native_infer: Infer | None = None
        if told.fallback_model:  # the native model, warm, in case the check fails the artifact
            options = RunOptions(threads=told.threads, signature=told.fallback_signature or None)
            native = served(self._opened(open_runner(Path(told.fallback_model), options)), values)
            self.native_infer = infer_function(native, told.batched, self.traffic)
            warm_up(native, told.largest, told.batched)
        self.tap = None
        if told.shadow_rate:
            key = bytes.fromhex(told.shadow_key)
            self.tap = ShadowTap(told.shadow_rate, told.shadow_address, key)

    def _opened(self, runner: Runner) -> Runner:
        runner.activate()
        self.runners.append(runner)
        return runner

    def execute(self, requests: list[Any]) -> list[Any]:
        import triton_python_backend_utils as pb_utils

        feeds = [self.feeds(request) for request in requests]
        if all(WARMUP_PARAMETER in r.parameters() for r in requests):
            answers = self.warm_infer(feeds)
        elif self.tap is not None and self.tap.fallback and self.native_infer is not None:
            self.traffic.native += len(requests)
            answers = self.native_infer(feeds)
        else:
            answers = self.infer(feeds)
            if self.tap is not None and not self.tap.fallback:
                for feed, answer in zip(feeds, answers, strict=True):
                    if isinstance(answer, dict):
                        self.tap.offer(feed, answer)
        return [self.response(pb_utils, answer) for answer in answers]

    def feeds(self, request: Any) -> Feeds:
        """A request's inputs by name (Triton checked their names, dtypes and shapes)."""
        readers = self.readers
        return {tensor.name(): readers[tensor.name()](tensor) for tensor in request.inputs()}

    def response(self, pb_utils: Any, answer: Answer) -> Any:
        if isinstance(answer, Exception):
            error = pb_utils.TritonError(f"{type(answer).__name__}: {answer}")
            return pb_utils.InferenceResponse(output_tensors=[], error=error)
        makers = self.makers
        tensors = [makers[name](pb_utils, name, answer[name]) for name in self.output_names]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def finalize(self) -> None:
        self.traffic.save(self.record)
        if self.tap is not None:
            self.tap.close()
        for runner in self.runners:
            runner.deactivate()
