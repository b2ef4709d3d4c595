"""Admission control's figures: derived from the latency budget and a measured rate, said where
they came from, given ones winning; written into config.pbtxt as Triton's queue policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trtconv.cli import main
from trtconv.core.errors import UsageError
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.options.deploy import DeployOptions
from trtconv.options.serve import ServeOptions
from trtconv.protocol.serving import TritonServing
from trtconv.serving.repository.admission import Admission, admission
from trtconv.serving.repository.triton_config import Batching, ModelConfigSpec, render_config


def test_the_timeout_leaves_one_batch_of_the_budget_and_the_queue_what_drains_in_it() -> None:
    policy = admission(100.0, 8, batch_ms=4.0, measured=" measured at start")
    assert policy.timeout_us == 96_000  # the budget less one batch-8 execution
    assert policy.max_queue_size == 192  # 8 / 4 ms = 2,000 samples/s, for 96 ms
    assert "100 ms latency budget less one batch-8 execution (4 ms measured at start)" in (
        policy.source
    )
    assert "2000 samples/s measured at start drains in the timeout" in policy.source


def test_a_served_rate_sizes_the_queue_and_given_figures_win() -> None:
    served = admission(50.0, 8, rate_per_s=400.0, measured=" served in run.json")
    assert (served.max_queue_size, served.timeout_us) == (20, 50_000)
    assert "no execution measured" in served.source
    given = admission(50.0, 8, batch_ms=4.0, queue_size=5, timeout_ms=20)
    assert (given.max_queue_size, given.timeout_us) == (5, 20_000)
    assert given.source == "timeout 20 ms (given); queue 5 (given)"
    # Never a queue smaller than one batch, nor a timeout below 1 ms.
    tight = admission(2.0, 8, batch_ms=4.0)
    assert (tight.max_queue_size, tight.timeout_us) == (8, 1_000)
    unmeasured = admission(100.0, 4)
    assert (unmeasured.max_queue_size, unmeasured.timeout_us) == (32, 100_000)
    assert "no measured rate" in unmeasured.source


def parsed(spec: ModelConfigSpec) -> Any:
    """config.pbtxt of `spec`, parsed by Triton's own protobuf."""
    model_config_pb2 = pytest.importorskip(
        "tritonclient.grpc.model_config_pb2", reason="tritonclient[grpc] is not installed"
    )
    from google.protobuf import text_format

    return text_format.Parse(render_config(spec), model_config_pb2.ModelConfig())


def parsed_config(policy: Admission) -> Any:
    """config.pbtxt of a batched model with `policy`, parsed by Triton's own protobuf."""
    spec = ModelConfigSpec(
        name="m",
        serving=TritonServing("onnxruntime", None, "model.onnx"),
        inputs=(TensorSpec("x", (None, 4), "float32"),),
        outputs=(TensorSpec("y", (None, 2), "float32"),),
        batching=Batching(8, (4, 8), 100),
        admission=policy,
    )
    return parsed(spec)


def test_config_pbtxt_carries_the_queue_policy() -> None:
    config = parsed_config(admission(100.0, 8, batch_ms=4.0))  # skips without tritonclient
    from tritonclient.grpc import model_config_pb2

    policy = config.dynamic_batching.default_queue_policy
    assert (policy.max_queue_size, policy.default_timeout_microseconds) == (192, 96_000)
    assert policy.timeout_action == model_config_pb2.ModelQueuePolicy.REJECT


@pytest.mark.parametrize(
    "changes",
    [{"latency_budget_ms": 0.0}, {"max_queue_size": -1}, {"queue_timeout_ms": -1.0}],
)
def test_admission_flags_are_checked(changes: dict[str, float], tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        ServeOptions(tmp_path, **changes)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        DeployOptions((tmp_path,), tmp_path / "repo", **changes)  # type: ignore[arg-type]


def test_serve_refuses_a_negative_queue(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(tmp_path), "--max-queue-size", "-1"])
    assert stopped.value.code == 2
    assert "--max-queue-size must be 0 (no limit) or more, found -1" in capsys.readouterr().err


def test_zero_is_no_limit_and_both_zero_no_queue_policy() -> None:
    # A timeout alone: the queue unbounded; without a timeout the budget sizes the queue.
    timeout_only = admission(100.0, 8, batch_ms=4.0, queue_size=0)
    assert (timeout_only.max_queue_size, timeout_only.timeout_us) == (0, 96_000)
    assert timeout_only.enabled and "no queue limit (given)" in timeout_only.source
    queue_only = admission(100.0, 8, batch_ms=4.0, timeout_ms=0)
    assert (queue_only.max_queue_size, queue_only.timeout_us) == (200, 0)
    assert "drains in the latency budget" in queue_only.source
    off = admission(100.0, 8, batch_ms=4.0, queue_size=0, timeout_ms=0)
    assert not off.enabled
    config = parsed_config(off)
    assert config.dynamic_batching.max_queue_delay_microseconds == 100
    assert not config.dynamic_batching.HasField("default_queue_policy")


def test_the_batcher_is_capped_at_the_artifacts_batch_range(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from trtconv.serving.server.served_from import ServedFrom

    built: Any = SimpleNamespace(batch_range=(1, 4))
    source = ServedFrom(tmp_path, built)
    assert source.batch_cap() == (4, " (the artifact's batch range is 1-4)")
    built.batch_range = None  # built for any batch
    assert source.batch_cap() == (None, "")
    assert ServedFrom(tmp_path, None).batch_cap() == (None, "")  # a SavedModel


def test_instances_divide_the_threads() -> None:
    from trtconv.serving.server.serve_plan import instance_threads

    assert instance_threads(None, 1) is None  # the runner's own default
    assert instance_threads(8, 2) == 4 and instance_threads(3, 2) == 1
    assert instance_threads(1, 4) == 1  # never below one thread
    with pytest.raises(UsageError, match="--instances"):
        ServeOptions(Path("m"), instances=0)


def test_a_server_others_can_reach_is_warned_about_unless_a_key_guards_it(
    tmp_path: Path,
) -> None:
    from trtconv.serving.server.serve import api_key
    from trtconv.serving.server.serve_lines import exposure_warning

    assert exposure_warning("127.0.0.1", None) is None
    warning = exposure_warning("0.0.0.0", None)
    assert warning is not None and "--api-key-file" in warning and "\n" not in warning
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    assert exposure_warning("0.0.0.0", key) is None
    assert api_key(key) == "s3cret" and api_key(None) is None
    key.write_text("  \n")
    with pytest.raises(UsageError, match="holds no key"):
        api_key(key)
    with pytest.raises(UsageError, match="does not exist"):
        ServeOptions(Path("m"), api_key_file=tmp_path / "missing")


def test_config_pbtxt_warms_the_model_up_before_it_is_ready() -> None:
    model_config_pb2 = pytest.importorskip(
        "tritonclient.grpc.model_config_pb2", reason="tritonclient[grpc] is not installed"
    )
    from google.protobuf import text_format

    def warmups(inputs: tuple[TensorSpec, ...], batching: Batching) -> list[tuple[Any, ...]]:
        spec = ModelConfigSpec(
            name="m",
            serving=TritonServing("onnxruntime", None, "model.onnx"),
            inputs=inputs,
            outputs=(TensorSpec("y", (None, 2), "float32"),),
            batching=batching,
        )
        config = text_format.Parse(render_config(spec), model_config_pb2.ModelConfig())
        return [
            (
                w.batch_size,
                w.count,
                {k: (list(v.dims), v.WhichOneof("input_data_type")) for k, v in w.inputs.items()},
            )
            for w in config.model_warmup
        ]

    batched = (TensorSpec("x", (None, 4, None), "float32"), TensorSpec("s", (None,), "string"))
    inputs = {"x": ([4, 1], "random_data"), "s": ([], "zero_data")}
    assert warmups(batched, Batching(8, (4, 8), 100)) == [(1, 5, inputs), (8, 5, inputs)]
    fixed = (TensorSpec("x", (1, 4), "float32"),)
    assert warmups(fixed, Batching(0)) == [(1, 5, {"x": ([1, 4], "random_data")})]


class Doubler:
    """A runner stand-in: y = 2x for x float32[?, ?]; fails on a NaN anywhere in its batch."""

    signature = ModelSignature(
        (TensorSpec("x", (None, None), "float32"),), (TensorSpec("y", (None, None), "float32"),)
    )

    def infer(self, feeds: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        if np.isnan(feeds["x"]).any():
            raise ValueError("NaN in the batch")
        return {"y": feeds["x"] * 2}


def test_a_batch_that_fails_is_retried_and_only_the_failing_request_fails() -> None:
    import numpy as np

    from trtconv.serving.server.batch_runner import Traffic, infer_function

    traffic = Traffic()
    infer = infer_function(Doubler(), True, traffic)  # type: ignore[arg-type]
    # Requests whose second dimension differs cannot be one batch: each is run alone.
    requests = [{"x": np.ones((1, 3), np.float32)}, {"x": np.ones((2, 5), np.float32)}]
    answers = infer(requests)
    assert [a["y"].shape for a in answers] == [(1, 3), (2, 5)]  # type: ignore[index]
    assert np.all(answers[1]["y"] == 2)  # type: ignore[index]
    assert (traffic.retried, traffic.failed, dict(traffic.batches)) == (2, 0, {1: 1, 2: 1})
    # One that fails alone gets its own error; the one batched with it is answered.
    bad = np.full((1, 3), np.nan, np.float32)
    first, second = infer([{"x": np.ones((1, 3), np.float32)}, {"x": bad}])
    assert isinstance(second, ValueError) and "NaN" in str(second)
    assert not isinstance(first, Exception) and np.all(first["y"] == 2)
    assert (traffic.requests, traffic.failed, traffic.retried) == (4, 1, 4)


def test_serve_asks_for_admission_control_and_a_queue_flag_implies_it(tmp_path: Path) -> None:
    from trtconv.serving.repository.admission import ADMISSION_OFF
    from trtconv.serving.server import serve
    from trtconv.serving.server.serve_lines import admission_line
    from trtconv.serving.server.serve_plan import Plan

    assert not ServeOptions(tmp_path).admission  # off unless asked (its cost: admission.py)
    assert ServeOptions(tmp_path, admission=True).admission
    assert ServeOptions(tmp_path, max_queue_size=16).admission
    assert ServeOptions(tmp_path, queue_timeout_ms=50.0).admission
    signature = ModelSignature(
        inputs=(TensorSpec("x", (None, 3), "float32"),),
        outputs=(TensorSpec("y", (None, 3), "float32"),),
    )
    plain = Plan(True, 8, "", (0.1, 0.2), ADMISSION_OFF)
    config = parsed(serve.served_config("m", signature, ServeOptions(tmp_path), plain))
    assert not config.dynamic_batching.HasField("default_queue_policy")
    assert config.backend == "python" and config.max_batch_size == 8
    said = admission_line(plain, 3.0)  # what an overload will do, and how to bound it
    assert (
        "admission: off (not asked for: --admission to turn it on): an overload is queued" in said
    )
    assert "--admission holds the wait within --latency-budget-ms" in said
    asked = Plan(True, 8, "", (0.1, 0.2), admission(100.0, 8, batch_ms=0.2))
    options = ServeOptions(tmp_path, admission=True)
    policy = parsed(serve.served_config("m", signature, options, asked))
    queue = policy.dynamic_batching.default_queue_policy
    assert queue.max_queue_size == asked.policy.max_queue_size
    assert queue.default_timeout_microseconds == asked.policy.timeout_us
    assert not policy.model_warmup  # each instance warms itself up


def test_traffic_survives_its_record(tmp_path: Path) -> None:
    import collections

    from trtconv.serving.server.batch_runner import Traffic

    traffic = Traffic(7, 1, 2, collections.Counter({1: 3, 4: 1}))
    traffic.save(tmp_path / "t.json")
    assert Traffic.load(tmp_path / "t.json") == traffic
    traffic.add(Traffic.load(tmp_path / "t.json"))
    assert (traffic.requests, traffic.batches[1]) == (14, 6)


def test_instances_are_chosen_from_the_cores_and_the_single_request_time() -> None:
    from trtconv.serving.server.serve_plan import MAX_AUTO_INSTANCES, auto_instances

    # A small model on 2 cores: one instance per core (the served path's cost runs on both).
    count, why = auto_instances(0.06, 100.0, 2)
    assert count == 2 and "2 core(s)" in why and "0.06 ms" in why
    assert auto_instances(0.1, 100.0, 64)[0] == MAX_AUTO_INSTANCES
    # A request that, on a share of the threads, would take more than half the budget: fewer
    # instances, never none.
    assert auto_instances(4.5, 20.0, 8)[0] == 2  # 10 ms of the budget: two of 4.5 ms
    assert auto_instances(60.0, 100.0, 8)[0] == 1


class Reshaper(Doubler):
    """y = x as rows of 4 for x float32[?, ?]: fails on a row count that 4 does not divide."""

    def infer(self, feeds: dict[str, Any]) -> dict[str, Any]:
        if feeds["x"].size % 4:
            raise ValueError(f"cannot reshape {feeds['x'].size} values\ninto rows of 4")
        return {"y": feeds["x"].reshape(-1, 4)}


def test_a_model_that_fails_its_warm_up_is_one_sentence() -> None:
    from trtconv.serving.server.serve_plan import ServingError, warm_up

    with pytest.raises(ServingError) as raised:
        warm_up(Reshaper(), 8, batched=True)  # type: ignore[arg-type]
    said = str(raised.value)
    assert "failed its warm-up on random inputs (batch 1 and 8;" in said
    assert "ValueError: cannot reshape 1 values into rows of 4" in said and "\n" not in said
    assert raised.value.exit_code == 1
