"""key_structure and compare on synthetic documents: what the JSON contract test counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.json_structure import ANY, compare, key_structure, merge

DOC: dict[str, Any] = {
    "backend": "ort",
    "seconds": 1.5,
    "passed": True,
    "accuracy": None,
    "checks": [
        {"name": "a", "passed": True},
        {"name": "b", "passed": False, "output": "probabilities"},
    ],
    "warnings": [],
    "validation": {"outputs": {"logits": {"role": "classes"}, "boxes": {"role": "tensor"}}},
    "environment": {"python": "3.11", "cpu": {"features": {"avx2": True}}},
}


def test_structure_keeps_keys_and_types() -> None:
    assert key_structure(DOC) == {
        "backend": "str",
        "seconds": "number",
        "passed": "bool",
        "accuracy": "null",
        # the union of the elements' keys
        "checks": [{"name": "str", "passed": "bool", "output": "str"}],
        "warnings": [],
        # output names are data: one "*" entry for all of them
        "validation": {"outputs": {"*": {"role": "str"}}},
        # the machine's description: its keys only
        "environment": {"python": ANY, "cpu": ANY},
    }


def test_structure_merges_list_elements() -> None:
    assert key_structure([1, None, 2]) == ["number"]
    assert key_structure([True, 0.5]) == ["bool|number"]
    assert key_structure([None, {"a": 1}, {"b": "x"}]) == [{"a": "number", "b": "str"}]
    assert key_structure([[], [{"a": 1}]]) == [[{"a": "number"}]]
    assert key_structure({"validation": {"outputs": {}}}) == {"validation": {"outputs": {}}}
    with pytest.raises(ValueError, match=r"x\[\]: cannot merge object with str"):
        key_structure({"x": [{"a": 1}, "b"]})


def test_merge_of_a_structure_with_itself_is_itself() -> None:
    structure = key_structure(DOC)
    assert merge(structure, structure) == structure


def test_identical_documents_agree() -> None:
    assert not compare(key_structure(DOC), key_structure(json.loads(json.dumps(DOC))))


def test_a_missing_key_fails() -> None:
    other = {**DOC, "checks": [{"name": "a", "passed": True}]}
    difference = compare(key_structure(DOC), key_structure(other))
    assert difference.missing == ["checks[].output"]
    assert not difference.extra and not difference.changed


def test_an_extra_key_fails() -> None:
    other = {**DOC, "validation": {"outputs": {"logits": {"role": "classes", "kind": "x"}}}}
    difference = compare(key_structure(DOC), key_structure(other))
    assert difference.extra == ["validation.outputs.*.kind"]
    assert not difference.missing and not difference.changed


def test_a_renamed_key_fails_both_ways() -> None:
    other = {k if k != "seconds" else "duration_s": v for k, v in DOC.items()}
    difference = compare(key_structure(DOC), key_structure(other))
    assert (difference.missing, difference.extra) == (["seconds"], ["duration_s"])
    assert difference.describe() == "missing: seconds\nextra:   duration_s"


def test_a_type_change_fails() -> None:
    other = {**DOC, "seconds": "1.5 s"}
    assert compare(key_structure(DOC), key_structure(other)).changed == ["seconds: number -> str"]
    nested = {**DOC, "validation": {"outputs": {"logits": {"role": ["classes"]}}}}
    difference = compare(key_structure(DOC), key_structure(nested))
    assert difference.changed == ["validation.outputs.*.role: str -> list"]
    assert compare({"a": "null"}, {"a": {"b": "str"}}).changed == ["a: null -> object"]


def test_null_agrees_with_any_scalar() -> None:
    assert not compare(key_structure(DOC), key_structure({**DOC, "accuracy": 0.99}))
    assert not compare(key_structure({**DOC, "seconds": None}), key_structure(DOC))
    assert not compare(["bool|number"], ["number"])
    assert compare(["bool|number"], ["str"]).changed == ["[]: bool|number -> str"]


def test_empty_lists_and_data_maps_agree_with_filled_ones() -> None:
    filled = {**DOC, "warnings": ["slow"], "checks": []}
    assert not compare(key_structure(DOC), key_structure(filled))
    empty = {**DOC, "validation": {"outputs": {}}}
    assert not compare(key_structure(DOC), key_structure(empty))
    assert not compare(key_structure(empty), key_structure(DOC))


def test_machine_descriptions_compare_only_their_keys() -> None:
    other = {**DOC, "environment": {"python": None, "cpu": "AMD", "gpus": [{"name": "H100"}]}}
    difference = compare(key_structure(DOC), key_structure(other))
    assert (difference.missing, difference.extra, difference.changed) == (
        [],
        ["environment.gpus"],
        [],
    )


def _leaves(structure: Any) -> set[str]:
    if isinstance(structure, dict):
        return set().union(*map(_leaves, structure.values())) if structure else set()
    if isinstance(structure, list):
        return _leaves(structure[0]) if structure else set()
    return set(structure.split("|"))


def test_golden_files_are_structures() -> None:
    """Each golden file holds a structure: only type names (or "any") at its leaves."""
    golden = sorted((Path(__file__).parent / "golden").glob("*.json"))
    names = ["bench", "convert", "convert_fp16", "convert_int8", "release", "validate"]
    assert [p.stem for p in golden] == names
    for path in golden:
        structure = json.loads(path.read_text())
        assert isinstance(structure, dict), path.name
        assert _leaves(structure) <= {"str", "number", "bool", "null", ANY}, path.name
