"""Tensors cross Triton's Python backend by DLPack: served answers equal, to the bit, what the
runner computes on the same inputs, for floats, integers and booleans, at batch 1, at a larger
batch and in batches Triton's batcher joins; string tensors are refused under NumPy 2."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from trtconv.core.errors import MissingDependencyError
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.serving.server.tensor_crossing import refuse_strings

NUMPY_2 = int(np.__version__.split(".")[0]) >= 2


def test_string_tensors_are_refused_under_numpy_2_in_one_sentence() -> None:
    texts = ModelSignature(
        inputs=(TensorSpec("image", (None, 4), "float32"), TensorSpec("text", (None,), "string")),
        outputs=(TensorSpec("length", (None,), "int32"),),
    )
    refuse_strings(texts, "1.26.4")  # NumPy 1: the backend's own conversion is right
    with pytest.raises(MissingDependencyError) as refused:
        refuse_strings(texts, "2.4.6")
    said = str(refused.value)
    assert said.startswith("trtconv serve cannot serve the string input 'text' under NumPy 2.4.6:")
    assert "NumPy 1.26" in said and said.count(". ") == 0 and said.endswith(".")
    outputs = ModelSignature(inputs=(), outputs=(TensorSpec("label", (None,), "string"),))
    with pytest.raises(MissingDependencyError, match="the string output 'label'"):
        refuse_strings(outputs, "2.0.0")
    refuse_strings(ModelSignature(inputs=texts.inputs[:1], outputs=()), "2.4.6")


def typed_feeds(rng: np.random.Generator, batch: int) -> dict[str, np.ndarray]:
    return {
        "x": rng.standard_normal((batch, 5)).astype(np.float32) * 1e3,
        "ids": rng.integers(-(2**40), 2**40, (batch, 6)),
        "mask": rng.random((batch, 6)) < 0.5,
        "pixels": rng.integers(0, 256, (batch, 4)).astype(np.uint8),
    }


async def ask_all(url: str, requests: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """All `requests` at once (the batcher joins them), each one's outputs."""
    import tritonclient.http.aio as aio
    from tritonclient.utils import np_to_triton_dtype

    client = aio.InferenceServerClient(url)
    try:

        async def one(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            inputs = []
            for name, array in feeds.items():
                tensor = aio.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
                tensor.set_data_from_numpy(array)
                inputs.append(tensor)
            result = await client.infer("typed", inputs)
            names = ("scaled", "half", "wide", "shifted", "kept", "inverted")
            return {name: result.as_numpy(name) for name in names}

        return list(await asyncio.gather(*(one(feeds) for feeds in requests)))
    finally:
        await client.close()


def executed_batches(url: str) -> list[int]:
    """The batch sizes Triton's statistics say model `typed` ran."""
    import tritonclient.http as http

    client = http.InferenceServerClient(url)
    try:
        stats = client.get_inference_statistics("typed")["model_stats"][0]["batch_stats"]
    finally:
        client.close()
    return [int(batch["batch_size"]) for batch in stats]


@pytest.mark.slow
@pytest.mark.tensorflow
def test_floats_integers_and_booleans_are_served_exactly_as_the_runner_computes_them() -> None:
    from tests.helpers.serving_fixtures import (
        pytriton_or_skip,
        serve_process,
        typed_model,
        workspace_of,
    )
    from trtconv.backends.registry import open_runner
    from trtconv.core.processes import descendants

    pytriton_or_skip()
    model = typed_model()
    rng = np.random.default_rng(7)
    requests = [typed_feeds(rng, batch) for batch in (1, 3, *([1] * 8), 2, 2)]
    with open_runner(model) as runner:
        expected = [runner.infer(feeds) for feeds in requests]
    # A 50 ms batching window: the requests sent at once are joined.
    flags = ("--name", "typed", "--instances", "1", "--queue-delay-us", "50000")
    with serve_process(model, *flags) as (process, url):
        workspace = workspace_of(descendants(process.pid))
        served = asyncio.run(ask_all(url, requests[:1]))  # alone: batch 1, then 3
        served += asyncio.run(ask_all(url, requests[1:2]))
        served += asyncio.run(ask_all(url, requests[2:]))  # at once: joined, split back
        batches = executed_batches(url)
        stub_output = (workspace / "triton.log").read_text()
    assert max(batches) > 3, batches  # some requests were run joined
    for want, got in zip(expected, served, strict=True):
        assert set(got) == set(want)
        for name, array in want.items():
            assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
            assert np.array_equal(got[name], array), name
    # The consumed capsules renamed: no output logged NumPy's capsule traceback.
    assert "Traceback" not in stub_output and "PyCapsule" not in stub_output


@pytest.mark.slow
@pytest.mark.tensorflow
def test_a_string_model_is_refused_before_triton_under_numpy_2_and_served_under_numpy_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.helpers.serving_fixtures import pytriton_or_skip, serve_process, string_model
    from trtconv.cli import main

    pytriton_or_skip()
    model = string_model()
    if NUMPY_2:
        with pytest.raises(SystemExit) as stopped:
            main(["serve", str(model), "--name", "texts"])
        err = capsys.readouterr().err
        assert stopped.value.code == 3
        assert "cannot serve the string input 'text' under NumPy" in err
        assert "Triton" in err and "serving texts" not in err
        return
    import tritonclient.http as http

    texts = np.array([[b"a"], [b"hello"], [b""], [b"triton"]], dtype=object)
    with serve_process(model, "--name", "texts", "--instances", "1") as (_, url):
        client = http.InferenceServerClient(url)
        try:
            tensor = http.InferInput("text", [4, 1], "BYTES")
            tensor.set_data_from_numpy(texts)
            lengths = client.infer("texts", [tensor]).as_numpy("length")
        finally:
            client.close()
    assert lengths.tolist() == [[1], [5], [0], [6]]
