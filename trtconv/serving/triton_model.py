"""The model Triton's Python backend runs for `trtconv serve`: trtconv's runner inside the
backend's own process (one per model instance), no proxy between them. Imported only there:
`triton_python_backend_utils` exists in that process alone. What it is told comes from the
settings file serving/triton_process.py writes beside model.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trtconv.backends.registry import open_runner
from trtconv.protocol.runner import RunOptions
from trtconv.serving.batch_runner import Answer, Traffic, infer_function, warm_up
from trtconv.serving.fixed_inputs import served
from trtconv.serving.triton_process import InstanceSettings

WARMUP_PARAMETER = "trtconv_warmup"  # a request parameter: the server's own warm-up, not counted


class TritonPythonModel:
    """Triton's Python-backend model: `initialize` opens and warms up the runner (before Triton
    marks the model ready), `execute` answers the batcher's requests, one response each (an
    error response for a request that failed alone), `finalize` records the traffic. The
    repository's model.py subclasses it, naming its settings file."""

    settings_file = ""

    def initialize(self, args: dict[str, str]) -> None:
        told = InstanceSettings.load(Path(self.settings_file))
        run = RunOptions(threads=told.threads, device=told.device, spin=False)
        self.runner = open_runner(Path(told.model), run)
        self.runner.activate()
        model = served(self.runner, Path(told.model))
        self.input_names = model.signature.input_names
        self.output_names = [spec.name for spec in model.signature.outputs]
        self.traffic, self.warm_traffic = Traffic(), Traffic()
        self.infer = infer_function(model, told.batched, self.traffic)
        self.warm_infer = infer_function(model, told.batched, self.warm_traffic)
        self.record = Path(told.traffic) / f"{os.getpid()}.json"  # an instance's own process
        warm_up(model, told.largest, told.batched)

    def execute(self, requests: list[Any]) -> list[Any]:
        import triton_python_backend_utils as pb_utils

        tensor = pb_utils.get_input_tensor_by_name
        feeds = [{name: tensor(r, name).as_numpy() for name in self.input_names} for r in requests]
        warm = all(WARMUP_PARAMETER in r.parameters() for r in requests)
        answers = (self.warm_infer if warm else self.infer)(feeds)
        return [self.response(pb_utils, answer) for answer in answers]

    def response(self, pb_utils: Any, answer: Answer) -> Any:
        if isinstance(answer, Exception):
            error = pb_utils.TritonError(f"{type(answer).__name__}: {answer}")
            return pb_utils.InferenceResponse(output_tensors=[], error=error)
        tensors = [pb_utils.Tensor(name, answer[name]) for name in self.output_names]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def finalize(self) -> None:
        self.traffic.save(self.record)
        self.runner.deactivate()
