"""The release config: every mistake is a UsageError naming its key path."""

from __future__ import annotations

from pathlib import Path

import pytest

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
from trtconv.release.settings import ReleaseConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "release-digits.toml"


@pytest.fixture()
def saved_model(tmp_path: Path) -> Path:
    """A directory that passes the cheap SavedModel check (config loading never loads TF)."""
    model = tmp_path / "model" / "saved_model"
    model.mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"")
    return model


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "release.toml"
    path.write_text(text)
    return path


def good(saved_model: Path, extra: str = "") -> str:
    return f"""
[model]
path = "{saved_model}"

[[targets]]
backend = "ort"
precision = "int8"

[[targets]]
backend = "tftrt"
precision = "fp16"

[calibration]
data = "digits"
method = "minmax"
samples = 64
int8_target = "portable"
fallback_time_limit_s = 120

[bench]
batch_sizes = [1, 8, 32]
iterations = 20
{extra}
"""


def test_full_config_is_read(tmp_path: Path, saved_model: Path) -> None:
    config = load_config(
        write(tmp_path, good(saved_model, "[gates]\nmin_speedup = 1.5\nmax_accuracy_drop = 0.01"))
    )
    assert config.model.path == saved_model
    assert [t.id for t in config.targets] == ["ort-int8", "tftrt-fp16"]
    assert config.calibration.method == "minmax"
    assert config.calibration.samples == 64
    assert config.calibration.int8_target == "portable"
    assert config.calibration.fallback and config.calibration.fallback_time_limit_s == 120.0
    assert config.bench.batch_sizes == (1, 8, 32)
    assert config.gates.min_speedup == 1.5
    assert config.gates.gate_batch_size == 32  # default: the largest bench batch size
    assert config.train is None
    echo = config.to_json()
    assert echo["targets"][0] == {
        "backend": "ort",
        "precision": "int8",
        "tolerance": None,
        "roles": {},
        "tolerances": {},
        "min_within": {},
        "rtol": None,
        "rtols": {},
        "id": "ort-int8",
    }
    assert echo["model"]["path"] == str(saved_model)


def test_committed_example_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE.parents[1])
    config = load_config(EXAMPLE)
    assert isinstance(config, ReleaseConfig)
    assert config.model.zoo == "digits-cnn"
    assert config.train is not None


BAD_VALUES = [
    ("[bench2]\nx = 1", "bench2: unknown key"),
    ("[gates]\nmin_speedp = 2.0", 'gates.min_speedp: unknown key (did you mean "min_speedup"?'),
    (
        '[gates]\nmin_speedup = "fast"',
        'gates.min_speedup: expected a positive number, found "fast"',
    ),
    (
        "[gates]\nmin_top1_agreement = 1.5",
        "gates.min_top1_agreement: expected a number between 0 and 1, found 1.5",
    ),
    (
        "[gates]\nmax_latency_ms_p99 = true",
        "gates.max_latency_ms_p99: expected a positive number, found true",
    ),
    (
        "[gates]\ngate_batch_size = 4",
        "gates.gate_batch_size: 4 is not one of bench.batch_sizes (1, 8, 32)",
    ),
    ('[eval]\ndata = "missing.npz"', "eval.data: data source missing.npz does not exist"),
    ("[eval]\nconfidence = 1", "eval.confidence: expected 0 (point decisions) or a level below 1"),
]


@pytest.mark.parametrize(("extra", "message"), BAD_VALUES)
def test_bad_values_name_the_key(
    tmp_path: Path, saved_model: Path, extra: str, message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        load_config(write(tmp_path, good(saved_model, extra)))
    assert message in str(caught.value)
    assert caught.value.exit_code == 2


def test_the_int8_ladder_can_be_turned_off(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace("fallback_time_limit_s = 120", "fallback = false")
    assert load_config(write(tmp_path, text)).calibration.fallback is False
    text = good(saved_model).replace("= 120", "= 0")
    with pytest.raises(UsageError, match=r"^calibration\.fallback_time_limit_s: expected a posi"):
        load_config(write(tmp_path, text))


def test_bad_int8_target_lists_the_options(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace('"portable"', '"avx2"')
    expected = r'^calibration\.int8_target: expected one of "auto", "vnni", "portable"'
    with pytest.raises(UsageError, match=expected):
        load_config(write(tmp_path, text))


def test_wrong_type_in_a_list_names_the_index(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace("batch_sizes = [1, 8, 32]", 'batch_sizes = [1, "8"]')
    expected = r'^bench\.batch_sizes\[1\]: expected a positive integer, found "8"\.$'
    with pytest.raises(UsageError, match=expected):
        load_config(write(tmp_path, text))


def test_unknown_key_in_a_target(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace('precision = "fp16"', 'precision = "fp16"\nbakend = "x"')
    with pytest.raises(UsageError, match=r"^targets\[1\]\.bakend: unknown key"):
        load_config(write(tmp_path, text))


def test_bad_choice_lists_the_options(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace('precision = "int8"', 'precision = "int4"')
    with pytest.raises(UsageError, match=r'^targets\[0\]\.precision: expected one of "fp32"'):
        load_config(write(tmp_path, text))


def test_missing_model(tmp_path: Path) -> None:
    text = '[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'
    with pytest.raises(UsageError, match=r"^model: missing"):
        load_config(write(tmp_path, text))


def test_model_path_that_does_not_exist(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace(str(saved_model), str(tmp_path / "nowhere"))
    with pytest.raises(UsageError, match=r"^model\.path: SavedModel .*nowhere does not exist"):
        load_config(write(tmp_path, text))


def test_model_needs_exactly_one_source(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace("[model]", '[model]\nzoo = "digits-cnn"')
    with pytest.raises(UsageError, match=r"^model: give exactly one"):
        load_config(write(tmp_path, text))


def test_train_table_needs_a_zoo_model(tmp_path: Path, saved_model: Path) -> None:
    with pytest.raises(UsageError, match=r"^train: only allowed with model\.zoo"):
        load_config(write(tmp_path, good(saved_model, "[train]\nepochs = 2")))


def test_zoo_model_with_train_table(tmp_path: Path) -> None:
    text = """
[model]
zoo = "digits-cnn"
[train]
epochs = 3
amp = false
[[targets]]
backend = "auto"
precision = "fp32"
"""
    config = load_config(write(tmp_path, text))
    assert config.train is not None and config.train.epochs == 3 and config.train.amp is False
    assert config.gates.gate_batch_size == 8


def test_unknown_zoo_model(tmp_path: Path) -> None:
    text = '[model]\nzoo = "alexnet"\n[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'
    with pytest.raises(UsageError, match=r'^model\.zoo: expected one of .*found "alexnet"'):
        load_config(write(tmp_path, text))


def test_int8_needs_calibration_data(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace('data = "digits"\n', "")
    with pytest.raises(UsageError, match=r"^calibration\.data: required by targets\[0\]"):
        load_config(write(tmp_path, text))


def test_duplicate_targets(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace('"tftrt"', '"ort"').replace('"fp16"', '"int8"')
    with pytest.raises(UsageError, match=r"^targets\[1\]: duplicates targets\[0\]"):
        load_config(write(tmp_path, text))


def test_no_targets(tmp_path: Path, saved_model: Path) -> None:
    with pytest.raises(UsageError, match=r"^targets: missing"):
        load_config(write(tmp_path, f'[model]\npath = "{saved_model}"\n'))


def test_iterations_and_duration_exclude_each_other(tmp_path: Path, saved_model: Path) -> None:
    text = good(saved_model).replace("iterations = 20", "iterations = 20\nduration_s = 2")
    with pytest.raises(UsageError, match=r"^bench: give iterations or duration_s, not both"):
        load_config(write(tmp_path, text))


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not valid TOML"):
        load_config(write(tmp_path, "[model\npath = 1"))
    with pytest.raises(UsageError, match="does not exist"):
        load_config(tmp_path / "absent.toml")


ZOO = """
[model]
zoo = "digits-cnn"
[[targets]]
backend = "ort"
precision = "int8"
{target}
[calibration]
data = "digits"
{extra}
"""


def test_output_roles_preprocessing_and_split_are_read(tmp_path: Path) -> None:
    text = ZOO.format(
        target='roles = { probabilities = "binary:0.3" }\ntolerances = { probabilities = 0.2 }'
        "\nrtol = 1e-3\nrtols = { probabilities = 0.01 }",
        extra='[outputs]\nroles = { probabilities = "classes" }\nallow_unjudged = true\n'
        "[preprocessing]\nscale = 1.0\nmean = [0.5, 0.4, 0.3]\nstd = [0.2, 0.2, 0.2]\n"
        '[eval]\nsplit = "all"',
    )
    config = load_config(write(tmp_path, text))
    assert config.eval.split == "all" and config.preprocessing.mean == (0.5, 0.4, 0.3)
    judging = config.outputs.judging(config.targets[0])
    assert judging.roles["probabilities"].role == "binary"  # the target's own wins
    assert judging.roles["probabilities"].threshold == 0.3
    assert judging.roles["probabilities"].source == "release config"
    tolerance = config.outputs.tolerance(config.targets[0])
    assert tolerance.atols == {"probabilities": 0.2} and judging.allow_unjudged
    assert tolerance.rtols == {"probabilities": 0.01} and tolerance.rtol == 1e-3
    assert tolerance.source == "release config"
    assert config.outputs.judging().roles["probabilities"].role == "classes"


def test_a_gated_regression_role_is_read(tmp_path: Path) -> None:
    """The release spelling of --output-role bbox=regression:where=face_prob."""
    text = ZOO.format(
        target='roles = { probabilities = "regression:where=probabilities" }', extra=""
    )
    config = load_config(write(tmp_path, text))
    role = config.outputs.judging(config.targets[0]).roles["probabilities"]
    assert role.role == "regression" and role.where == "probabilities"


@pytest.mark.parametrize(
    ("target", "extra", "message"),
    [
        (
            'roles = { probabilities = "boxes" }',
            "",
            r"^targets\[0\]\.roles\.probabilities: "
            "expected one of classes",
        ),
        (
            'roles = { probabilities = "regression:where=face" }',
            "",
            r"^targets\[0\]\.roles\.probabilities: where=face: the model has no output 'face'",
        ),
        (
            "",
            '[outputs]\nroles = { logits = "classes" }',
            r"^outputs\.roles\.logits: the model has no output 'logits' \(its outputs: "
            r"probabilities\)",
        ),
        (
            "",
            "[outputs]\ntolerances = { probabilities = -1 }",
            r"^outputs\.tolerances\.probabilities: expected a positive number",
        ),
        ("", "[outputs]\nallow_unjudged = 1", r"^outputs\.allow_unjudged: expected true or false"),
        ("", "[preprocessing]\nmean = [0.5, 0.5]\nstd = [0.2]", r"^preprocessing\.std: 1 values"),
        ("", '[preprocessing]\nscale = "1/255"', r"^preprocessing\.scale: expected a positive"),
        ("", '[eval]\nsplit = "train"', r'^eval\.split: expected one of "held-out", "all"'),
    ],
)
def test_bad_output_and_preprocessing_keys_name_their_path(
    tmp_path: Path, target: str, extra: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        load_config(write(tmp_path, ZOO.format(target=target, extra=extra)))


MINIMAL = '[model]\npath = "{}"\n[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'


def test_what_the_config_leaves_out_is_each_commands_default(
    tmp_path: Path, saved_model: Path
) -> None:
    """The release sets only what it owns (outputs, their tolerances as its own, force, its bench
    batch sizes, the contest's batch size); every other option is the command's own default."""
    config = load_config(write(tmp_path, MINIMAL.format(saved_model)))
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
    zoo = load_config(write(tmp_path, MINIMAL.replace('path = "{}"', 'zoo = "digits-cnn"')))
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
    config = load_config(write(tmp_path, good(saved_model, extra)))
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
    text = MINIMAL.format(model).replace("[[targets]]", 'signature = "predict_logits"\n[[targets]]')
    config = load_config(write(tmp_path, text))
    target, artifact = config.targets[0], tmp_path / "artifact"
    assert config.model.signature == "predict_logits"
    assert convert_options(config, target, model, artifact).signature == "predict_logits"
    assert validate_options(config, target, artifact, model).signature == "predict_logits"
    assert bench_options(config, [model], tmp_path / "bench").signature == "predict_logits"
    assert config.to_json()["model"]["signature"] == "predict_logits"
    roles = text + '[outputs]\nroles = { logits = "classes" }\n'  # the chosen signature's outputs
    assert load_config(write(tmp_path, roles)).outputs.roles == {"logits": "classes"}
    missing = MINIMAL.format(model).replace("[[targets]]", 'signature = "nope"\n[[targets]]')
    with pytest.raises(
        UsageError,
        match=r"^model\.signature: SavedModel .* has no 'nope' "
        r"signature \(found: predict_logits, serving_default\)",
    ):
        load_config(write(tmp_path, missing))
    zoo = MINIMAL.replace('path = "{}"', 'zoo = "digits-cnn"\nsignature = "x"')
    with pytest.raises(UsageError, match=r"^model\.signature: only with model\.path"):
        load_config(write(tmp_path, zoo))


def test_input_values_and_custom_objects_reach_the_convert_options(
    tmp_path: Path, saved_model: Path
) -> None:
    text = good(saved_model, "[preprocessing]\ninput_values = { is_training = false, rate = 0.5 }")
    text = text.replace("[[targets]]", 'custom_objects = ["layers:Attention"]\n\n[[targets]]', 1)
    config = load_config(write(tmp_path, text))
    assert config.model.custom_objects == ("layers:Attention",)
    options = convert_options(config, config.targets[0], saved_model, tmp_path / "out")
    assert options.preprocessing.input_values == {"is_training": False, "rate": 0.5}
    assert options.custom_objects == ("layers:Attention",)
    bad = good(saved_model, '[preprocessing]\ninput_values = { is_training = "no" }')
    with pytest.raises(UsageError, match=r"input_values\.is_training: expected true, false or a"):
        load_config(write(tmp_path, bad))
