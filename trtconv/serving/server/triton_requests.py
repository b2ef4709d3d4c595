"""What `serve` asks of the running server through its endpoints: the warm-up requests that go
through Triton itself before the server is announced, and the count of requests its queue
policy rejected."""

from __future__ import annotations

import re
import time
import urllib.request
from typing import Any

import numpy as np

from trtconv.core.model_io import ModelSignature
from trtconv.serving.server.batch_runner import WARMUP_RUNS
from trtconv.serving.server.serve_plan import Plan
from trtconv.serving.server.start_check import difference, mismatch_sentence
from trtconv.serving.server.triton_model import WARMUP_PARAMETER
from trtconv.serving.server.triton_process import ACCESS_HEADER, ServingError

WARMUP_SERVED_S = 60.0  # how long the served warm-up may retry requests the queue timed out
# Triton's counter of requests its queue policy rejected when their timeout expired.
REJECTED_METRIC = re.compile(
    r'^nv_inference_request_failure\{model="(?P<model>[^"]+)",reason="REJECTED"[^}]*\}\s+'
    r"(?P<count>[0-9.eE+]+)",
    re.M,
)


def warm_up_served(
    address: str, name: str, signature: ModelSignature, decided: Plan, key: str | None
) -> float:
    """WARMUP_RUNS requests through the server itself before it is announced (the first ones
    pay Triton's own set-up), the checked ones in turn (`decided.expected`), each answer
    compared with the runner's (start_check.py): the median milliseconds. Raises
    ServingError when an answer differs, or when none comes within WARMUP_SERVED_S."""
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException, np_to_triton_dtype

    headers = {ACCESS_HEADER: key} if key else None
    marked = {WARMUP_PARAMETER: True}  # the instances do not count it as traffic
    client = http.InferenceServerClient(address)
    times: list[float] = []
    deadline = time.monotonic() + WARMUP_SERVED_S
    requests = []
    for want in decided.expected:
        inputs = []
        for tensor, array in want.feeds.items():
            request = http.InferInput(tensor, list(array.shape), np_to_triton_dtype(array.dtype))
            request.set_data_from_numpy(array)
            inputs.append(request)
        requests.append((want, inputs))
    try:
        while len(times) < WARMUP_RUNS:
            which = len(times) % len(requests)
            want, inputs = requests[which]
            start = time.perf_counter()
            try:
                answer = client.infer(name, inputs, headers=headers, parameters=marked)
            except InferenceServerException as exc:
                # The first requests may outlive the queue timeout (set-up on busy cores): the
                # warm-up is what pays for them; only the last try's error is raised.
                if time.monotonic() > deadline:
                    raise ServingError(
                        f"{name} did not answer its warm-up requests: {exc}"
                    ) from exc
                continue
            times.append((time.perf_counter() - start) * 1000)
            what = unreadable(answer, signature) or difference(
                signature, want, {o.name: answer.as_numpy(o.name) for o in signature.outputs}
            )
            if what:
                raise ServingError(mismatch_sentence(which + 1, want, what))
    finally:
        client.close()
    return float(np.median(times))


def unreadable(result: Any, signature: ModelSignature) -> str:
    """The first output of a tritonclient result that cannot be read as an array (one whose
    bytes do not fill its shape: the 0-byte outputs of Triton 2.51's `pb_utils.Tensor` under
    NumPy 2), said; "" when every one can."""
    for spec in signature.outputs:
        try:
            if result.as_numpy(spec.name) is None:
                return f"output '{spec.name}' is missing"
        except (ValueError, TypeError) as exc:
            return f"output '{spec.name}' cannot be read ({type(exc).__name__}: {exc})"
    return ""


def rejected_count(metrics_url: str, name: str) -> int:
    """Requests of model `name` Triton's queue policy rejected (timed out in the queue), from
    its metrics; 0 when they cannot be read. Triton 2.51 counts no refusal at a full queue."""
    try:
        with urllib.request.urlopen(metrics_url, timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return 0
    return sum(int(float(count)) for model, count in REJECTED_METRIC.findall(text) if model == name)
