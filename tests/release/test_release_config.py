"""The release config: every mistake is a UsageError naming its key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.release_configs import cheap_saved_model, good_config, write_config
from trtconv.core.errors import UsageError
from trtconv.release.config import load_config
from trtconv.release.settings import ReleaseConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "release-digits.toml"


@pytest.fixture()
def saved_model(tmp_path: Path) -> Path:
    return cheap_saved_model(tmp_path)


def test_full_config_is_read(tmp_path: Path, saved_model: Path) -> None:
    config = load_config(
        write_config(
            tmp_path,
            good_config(saved_model, "[gates]\nmin_speedup = 1.5\nmax_accuracy_drop = 0.01"),
        )
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
        load_config(write_config(tmp_path, good_config(saved_model, extra)))
    assert message in str(caught.value)
    assert caught.value.exit_code == 2


def test_the_int8_ladder_can_be_turned_off(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace("fallback_time_limit_s = 120", "fallback = false")
    assert load_config(write_config(tmp_path, text)).calibration.fallback is False
    text = good_config(saved_model).replace("= 120", "= 0")
    with pytest.raises(UsageError, match=r"^calibration\.fallback_time_limit_s: expected a posi"):
        load_config(write_config(tmp_path, text))


def test_bad_int8_target_lists_the_options(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace('"portable"', '"avx2"')
    expected = r'^calibration\.int8_target: expected one of "auto", "vnni", "portable"'
    with pytest.raises(UsageError, match=expected):
        load_config(write_config(tmp_path, text))


def test_wrong_type_in_a_list_names_the_index(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace("batch_sizes = [1, 8, 32]", 'batch_sizes = [1, "8"]')
    expected = r'^bench\.batch_sizes\[1\]: expected a positive integer, found "8"\.$'
    with pytest.raises(UsageError, match=expected):
        load_config(write_config(tmp_path, text))


def test_unknown_key_in_a_target(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace(
        'precision = "fp16"', 'precision = "fp16"\nbakend = "x"'
    )
    with pytest.raises(UsageError, match=r"^targets\[1\]\.bakend: unknown key"):
        load_config(write_config(tmp_path, text))


def test_bad_choice_lists_the_options(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace('precision = "int8"', 'precision = "int4"')
    with pytest.raises(UsageError, match=r'^targets\[0\]\.precision: expected one of "fp32"'):
        load_config(write_config(tmp_path, text))


def test_missing_model(tmp_path: Path) -> None:
    text = '[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'
    with pytest.raises(UsageError, match=r"^model: missing"):
        load_config(write_config(tmp_path, text))


def test_model_path_that_does_not_exist(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace(str(saved_model), str(tmp_path / "nowhere"))
    with pytest.raises(UsageError, match=r"^model\.path: SavedModel .*nowhere does not exist"):
        load_config(write_config(tmp_path, text))


def test_model_needs_exactly_one_source(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace("[model]", '[model]\nzoo = "digits-cnn"')
    with pytest.raises(UsageError, match=r"^model: give exactly one"):
        load_config(write_config(tmp_path, text))


def test_train_table_needs_a_zoo_model(tmp_path: Path, saved_model: Path) -> None:
    with pytest.raises(UsageError, match=r"^train: only allowed with model\.zoo"):
        load_config(write_config(tmp_path, good_config(saved_model, "[train]\nepochs = 2")))


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
    config = load_config(write_config(tmp_path, text))
    assert config.train is not None and config.train.epochs == 3 and config.train.amp is False
    assert config.gates.gate_batch_size == 8


def test_unknown_zoo_model(tmp_path: Path) -> None:
    text = '[model]\nzoo = "alexnet"\n[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'
    with pytest.raises(UsageError, match=r'^model\.zoo: expected one of .*found "alexnet"'):
        load_config(write_config(tmp_path, text))


def test_int8_needs_calibration_data(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace('data = "digits"\n', "")
    with pytest.raises(UsageError, match=r"^calibration\.data: required by targets\[0\]"):
        load_config(write_config(tmp_path, text))


def test_duplicate_targets(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace('"tftrt"', '"ort"').replace('"fp16"', '"int8"')
    with pytest.raises(UsageError, match=r"^targets\[1\]: duplicates targets\[0\]"):
        load_config(write_config(tmp_path, text))


def test_no_targets(tmp_path: Path, saved_model: Path) -> None:
    with pytest.raises(UsageError, match=r"^targets: missing"):
        load_config(write_config(tmp_path, f'[model]\npath = "{saved_model}"\n'))


def test_iterations_and_duration_exclude_each_other(tmp_path: Path, saved_model: Path) -> None:
    text = good_config(saved_model).replace("iterations = 20", "iterations = 20\nduration_s = 2")
    with pytest.raises(UsageError, match=r"^bench: give iterations or duration_s, not both"):
        load_config(write_config(tmp_path, text))


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not valid TOML"):
        load_config(write_config(tmp_path, "[model\npath = 1"))
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
    config = load_config(write_config(tmp_path, text))
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
    config = load_config(write_config(tmp_path, text))
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
        load_config(write_config(tmp_path, ZOO.format(target=target, extra=extra)))
