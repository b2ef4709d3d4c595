"""An artifact converted with `--input-value` (a TF1 training flag) is served with that value
set by the server: Triton declares only the inputs clients send, and the served answers are the
model's at that value (computed in numpy from the model's weights)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cli_runner import run_cli
from tests.helpers.tf1_fixtures import FEATURES, build_tf1_model
from trtconv import api
from trtconv.backends.registry import open_runner
from trtconv.options.deploy import DeployOptions
from trtconv.serving.repository.fixed_inputs import WithInputValues, recorded_input_values, served
from trtconv.serving.repository.triton_config import Batching, triton_dims
from trtconv.serving.server.batch_runner import Traffic, infer_function

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # converts a TF1 graph


def test_the_recorded_flag_is_set_by_the_server_not_sent_by_clients(tmp_path: Path) -> None:
    model = build_tf1_model(tmp_path / "tf1", "input")
    inputs = np.random.default_rng(2).normal(0, 1, (64, FEATURES)).astype(np.float32)
    data = tmp_path / "x.npz"
    np.savez(data, x=inputs)  # the flag is not in the data: --input-value sets it
    artifact = tmp_path / "artifact"
    convert = ["convert", model.path, "--precision", "fp32", "--calib-data", data]
    done = run_cli(*convert, "--input-value", "is_training=false", "--output", artifact)
    assert done.returncode == 0, done.stderr
    assert recorded_input_values(artifact) == {"is_training": False}
    assert recorded_input_values(model.path) == {}  # a SavedModel records none

    runner = open_runner(artifact)
    runner.activate()
    try:
        model_served = served(runner, recorded_input_values(artifact))
        assert isinstance(model_served, WithInputValues)
        declared = model_served.signature.inputs
        assert [spec.name for spec in declared] == ["x"]  # what Triton asks clients for
        assert triton_dims(declared[0], Batching(8)) == [FEATURES]
        infer = infer_function(model_served, True, Traffic())
        # Three requests as the dynamic batcher groups them: x only.
        requests = [{"x": inputs[:5]}, {"x": inputs[5:6]}, {"x": inputs[6:20]}]
        answers = infer(requests)
    finally:
        runner.deactivate()
    got = np.concatenate([answer["tags"] for answer in answers])  # type: ignore[index]
    np.testing.assert_allclose(got, model.expected(inputs[:20]), atol=1e-5)
    # A Triton repository cannot set it: deploy says clients must send it.
    result = api.deploy(DeployOptions((artifact,), output=tmp_path / "repository"))
    assert any("is_training=False (--input-value)" in line for line in result.warnings)
