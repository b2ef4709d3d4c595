"""`serve --shadow` refuses what it cannot do in one sentence and exit 2, before it looks for
Triton; with `--on-failing fallback` admission control is derived from the slower model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cli_runner import run_cli
from tests.helpers.shadow_fixtures import shadow_manifest
from trtconv.artifact.manifest import write_manifest
from trtconv.core.errors import UsageError
from trtconv.core.model_io import Feeds, ModelSignature, Outputs, TensorSpec
from trtconv.options.serve import ServeOptions
from trtconv.serving.server.serve_plan import plan
from trtconv.serving.server.served_from import ServedFrom


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ({"shadow": 1.5}, "above 0 and at most 1"),
        ({"shadow": 0.0}, "above 0 and at most 1"),
        ({"on_failing": "fallback"}, "give --shadow"),
        ({"shadow_capture": Path("captures")}, "give --shadow"),
        ({"shadow": 0.1, "on_failing": "retry"}, "--on-failing must be one of warn, fallback"),
    ],
)
def test_bad_shadow_options_are_usage_errors(flags: dict[str, object], said: str) -> None:
    with pytest.raises(UsageError, match=said):
        ServeOptions(Path("m"), **flags)  # type: ignore[arg-type]


def test_the_cli_says_which_native_model_is_missing_and_exits_2(tmp_path: Path) -> None:
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "model.onnx").write_bytes(b"onnx")
    write_manifest(artifact, shadow_manifest(source=tmp_path / "gone" / "saved_model"))
    done = run_cli("serve", artifact, "--shadow", "0.01")
    assert done.returncode == 2, done.stderr
    assert f"{tmp_path / 'gone' / 'saved_model'}, which does not exist here" in done.stderr
    saved_model = tmp_path / "saved_model"
    saved_model.mkdir()
    (saved_model / "saved_model.pb").write_bytes(b"")
    done = run_cli("serve", saved_model, "--shadow", "0.01")
    assert done.returncode == 2 and "nothing to compare it with" in done.stderr
    assert run_cli("serve", artifact, "--shadow", "1.5").returncode == 2


class Doubler:
    """A model of a few microseconds a call: y = 2x."""

    signature = ModelSignature(
        inputs=(TensorSpec("x", (None, 3), "float32"),),
        outputs=(TensorSpec("y", (None, 3), "float32"),),
    )

    def infer(self, feeds: Feeds) -> Outputs:
        return {"y": np.asarray(feeds["x"]) * 2}


def test_a_fallback_derives_admission_from_the_slower_native_model(tmp_path: Path) -> None:
    source = ServedFrom(tmp_path, None)
    slow_native = {"native_warm_up": lambda largest, batched: (5.0, 40.0)}  # ms, measured
    asked = {"admission": True, "shadow": 0.1}
    fallback = plan(
        Doubler(), ServeOptions(tmp_path, **asked, on_failing="fallback"), source, **slow_native
    )  # type: ignore[arg-type]
    assert fallback.native_warm == (5.0, 40.0)
    assert fallback.policy.timeout_ms == pytest.approx(60.0)  # 100 ms budget less 40 ms
    assert "the slower of the artifact and its native model" in fallback.policy.source
    warn = plan(Doubler(), ServeOptions(tmp_path, **asked), source, **slow_native)  # type: ignore[arg-type]
    assert warn.policy.timeout_ms > 90.0  # the native model never serves: the artifact decides
