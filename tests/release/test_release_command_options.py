"""What a release config gives each command it runs (train, convert, validate, bench): the
options the config sets, and each command's own default for what it leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.release_configs import (
    MINIMAL_CONFIG,
    cheap_saved_model,
    good_config,
    write_config,
)
from tests.helpers.rules import rules
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import RELEASE_CONFIG, Judging, ToleranceOptions
from trtconv.options.bench import BenchOptions
from trtconv.options.convert import Contest, ConvertOptions
from trtconv.options.release import DEFAULT_RELEASE_BATCH_SIZES
from trtconv.options.shared import PreprocessingOptions
from trtconv.options.train import TrainOptions
from trtconv.options.validate import ValidateOptions
from trtconv.release.command_options import (
    bench_options,
    convert_options,
    train_options,
    validate_options,
)
from trtconv.release.config import load_config


@pytest.fixture()
def saved_model(tmp_path: Path) -> Path:
    return cheap_saved_model(tmp_path)


def test_what_the_config_leaves_out_is_each_commands_default(
    tmp_path: Path, saved_model: Path
) -> None:
    """The release sets only what it owns (outputs, their tolerances as its own, force, its bench
    batch sizes, the contest's batch size); every other option is the command's own default."""
    config = load_config(write_config(tmp_path, MINIMAL_CONFIG.format(saved_model)))
    target, artifact, report = config.targets[0], tmp_path / "artifact", tmp_path / "bench"
    assert convert_options(config, target, saved_model, artifact) == ConvertOptions(
        saved_model,
        "fp32",
        "ort",
        artifact,
        force=True,
        batch_sizes=DEFAULT_RELEASE_BATCH_SIZES,
        contest=Contest(batch_size=max(DEFAULT_RELEASE_BATCH_SIZES)),
        tolerance=ToleranceOptions(source=RELEASE_CONFIG),
    )
    assert validate_options(config, target, artifact, saved_model) == ValidateOptions(
        artifact, reference=saved_model, tolerance=ToleranceOptions(source=RELEASE_CONFIG)
    )
    assert bench_options(config, [saved_model, artifact], report) == BenchOptions(
        (saved_model, artifact), batch_sizes=DEFAULT_RELEASE_BATCH_SIZES, report=report, force=True
    )
    zoo = load_config(
        write_config(tmp_path, MINIMAL_CONFIG.replace('path = "{}"', 'zoo = "digits-cnn"'))
    )
    assert train_options(zoo, tmp_path / "model") == TrainOptions(
        "digits-cnn", output=tmp_path / "model", force=True
    )


def test_config_sets_each_commands_options(tmp_path: Path, saved_model: Path) -> None:
    extra = """
[eval]
data = "digits"
samples = 300
split = "all"
confidence = 0.99
[gates]
min_top1_agreement = 0.5
max_accuracy_drop = 0.001
gate_batch_size = 8
[preprocessing]
scale = 0.5
[outputs]
allow_unjudged = true
"""
    config = load_config(write_config(tmp_path, good_config(saved_model, extra)))
    int8, fp16 = config.targets
    options = convert_options(config, int8, saved_model, tmp_path / "a")
    assert (options.calib_data, options.calib_samples, options.calib_method) == (
        "digits",
        64,
        "minmax",
    )
    assert (options.int8_target, options.fallback_time_limit_s) == ("portable", 120.0)
    assert options.batch_sizes == (1, 8, 32) and options.validate_samples == 300
    # Each accuracy gate limits convert where it is stricter than the precision's own limit.
    own = rules("int8")
    assert options.min_top1_agreement == own.min_top1_agreement
    assert options.max_accuracy_drop == 0.001
    assert options.preprocessing == PreprocessingOptions(scale=0.5)
    assert options.judging == Judging(allow_unjudged=True)
    # [bench] times a `best` target's candidates: at the gate batch size, its iterations.
    assert options.contest == Contest(batch_size=8, iterations=20)
    validate = validate_options(config, fp16, tmp_path / "b", saved_model)
    assert (validate.data, validate.samples, validate.split) == ("digits", 300, "all")
    assert options.confidence == validate.confidence == 0.99  # [eval] confidence: both
    bench = bench_options(config, [saved_model], tmp_path / "bench")
    assert (bench.iterations, bench.data, bench.eval_data) == (20, "digits", "digits")


def _two_signatures(path: Path) -> Path:
    """A tiny SavedModel with serving_default and predict_logits."""
    import tensorflow as tf

    spec = tf.TensorSpec([None, 2], tf.float32, name="x")
    module = tf.Module()
    module.serve = tf.function(
        lambda x: {"probabilities": tf.nn.softmax(x)}, input_signature=[spec]
    )
    module.logits = tf.function(lambda x: {"logits": 2.0 * x}, input_signature=[spec])
    signatures = {"serving_default": module.serve, "predict_logits": module.logits}
    tf.saved_model.save(module, str(path), signatures=signatures)
    return path


@pytest.mark.slow  # saves a SavedModel with TensorFlow
@pytest.mark.tensorflow
def test_model_signature_reaches_every_command(tmp_path: Path) -> None:
    model = _two_signatures(tmp_path / "two")
    text = MINIMAL_CONFIG.format(model).replace(
        "[[targets]]", 'signature = "predict_logits"\n[[targets]]'
    )
    config = load_config(write_config(tmp_path, text))
    target, artifact = config.targets[0], tmp_path / "artifact"
    assert config.model.signature == "predict_logits"
    assert convert_options(config, target, model, artifact).signature == "predict_logits"
    assert validate_options(config, target, artifact, model).signature == "predict_logits"
    assert bench_options(config, [model], tmp_path / "bench").signature == "predict_logits"
    assert config.to_json()["model"]["signature"] == "predict_logits"
    roles = text + '[outputs]\nroles = { logits = "classes" }\n'  # the chosen signature's outputs
    assert load_config(write_config(tmp_path, roles)).outputs.roles == {"logits": "classes"}
    missing = MINIMAL_CONFIG.format(model).replace("[[targets]]", 'signature = "nope"\n[[targets]]')
    with pytest.raises(
        UsageError,
        match=r"^model\.signature: SavedModel .* has no 'nope' "
        r"signature \(found: predict_logits, serving_default\)",
    ):
        load_config(write_config(tmp_path, missing))
    zoo = MINIMAL_CONFIG.replace('path = "{}"', 'zoo = "digits-cnn"\nsignature = "x"')
    with pytest.raises(UsageError, match=r"^model\.signature: only with model\.path"):
        load_config(write_config(tmp_path, zoo))


def test_input_values_and_custom_objects_reach_the_convert_options(
    tmp_path: Path, saved_model: Path
) -> None:
    text = good_config(
        saved_model, "[preprocessing]\ninput_values = { is_training = false, rate = 0.5 }"
    )
    text = text.replace("[[targets]]", 'custom_objects = ["layers:Attention"]\n\n[[targets]]', 1)
    config = load_config(write_config(tmp_path, text))
    assert config.model.custom_objects == ("layers:Attention",)
    options = convert_options(config, config.targets[0], saved_model, tmp_path / "out")
    assert options.preprocessing.input_values == {"is_training": False, "rate": 0.5}
    assert options.custom_objects == ("layers:Attention",)
    bad = good_config(saved_model, '[preprocessing]\ninput_values = { is_training = "no" }')
    with pytest.raises(UsageError, match=r"input_values\.is_training: expected true, false or a"):
        load_config(write_config(tmp_path, bad))
