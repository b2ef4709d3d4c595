"""`--backend best`'s decision: the fastest validated candidate wins; every other says why not."""

from __future__ import annotations

import json

from trtconv.convert import tournament
from trtconv.convert.best import no_winner
from trtconv.convert.tournament import Entrant, TournamentTable, decide, ordered
from trtconv.core.errors import AccuracyError


def field() -> list[Entrant]:
    timed_fast = Entrant("openvino", "int8", throughput_per_s=60.0)
    timed_slow = Entrant("ort", "int8", throughput_per_s=20.0)
    failed = Entrant("ort", "fp16")
    failed.drop(tournament.FAILED_VALIDATION, "top-1 agreement 0.90 < 0.98")
    absent = Entrant("trt", "fp32")
    absent.drop(tournament.NOT_AVAILABLE, "no NVIDIA GPU is visible")
    untimed = Entrant("openvino", "fp32")
    return [absent, timed_slow, failed, untimed, timed_fast]


def test_fastest_validated_candidate_wins_and_the_others_say_why() -> None:
    candidates = field()
    winner = decide(candidates, batch_size=8)
    assert winner is not None and winner.name == "openvino int8"
    by_name = {c.name: c for c in candidates}
    assert by_name["openvino int8"].verdict == tournament.WINNER
    assert by_name["openvino int8"].reason.endswith("60.0 samples/s at batch 8")
    slower = by_name["ort int8"]
    assert slower.verdict == tournament.SLOWER and slower.relative_throughput == 0.3333
    assert slower.reason == "slower: 20.0 vs 60.0 samples/s at batch 8 (0.33x the winner)"
    assert by_name["openvino fp32"].verdict == tournament.NOT_TIMED
    assert by_name["ort fp16"].reason == "top-1 agreement 0.90 < 0.98"
    table = [c.name for c in ordered(candidates)]
    assert table == ["openvino int8", "ort int8", "ort fp16", "openvino fp32", "trt fp32"]


def test_no_winner_when_nothing_passed() -> None:
    candidates = field()[:3]
    for candidate in candidates[1:2]:
        candidate.drop(tournament.FAILED_VALIDATION, "accuracy drop 0.05 > 0.02")
    assert decide(candidates, batch_size=1) is None
    assert all(c.verdict != tournament.WINNER for c in candidates)


def test_ties_go_to_the_registry_order() -> None:
    first = Entrant("ort", "fp32", throughput_per_s=10.0)
    second = Entrant("openvino", "fp32", throughput_per_s=10.0)
    assert decide([first, second], batch_size=1) is first
    assert second.verdict == tournament.SLOWER


def test_a_winner_within_noise_of_the_runner_up_says_so() -> None:
    winner = Entrant("openvino", "int8", throughput_per_s=60.0, throughput_per_s_ci95=[55, 66])
    close = Entrant("ort", "int8", throughput_per_s=58.0, throughput_per_s_ci95=[52.0, 57.5])
    far = Entrant("ort", "fp32", throughput_per_s=30.0, throughput_per_s_ci95=[28.0, 31.0])
    assert decide([far, close, winner], batch_size=8) is winner
    assert tournament.runner_up_within_noise([far, close, winner], winner) is close
    assert winner.reason == (
        "fastest that passed validation: 60.0 samples/s at batch 8; within noise of ort int8 "
        "(throughput 95% intervals 55.0-66.0 and 52.0-57.5 samples/s overlap)"
    )


def test_a_clear_winner_says_nothing_of_noise() -> None:
    winner = Entrant("openvino", "int8", throughput_per_s=60.0, throughput_per_s_ci95=[58, 62])
    slower = Entrant("ort", "int8", throughput_per_s=50.0, throughput_per_s_ci95=[48.0, 52.0])
    untimed_intervals = Entrant("ort", "fp32", throughput_per_s=59.0)
    decide([slower, winner], batch_size=8)
    assert "noise" not in winner.reason
    assert tournament.runner_up_within_noise([slower, winner], winner) is None
    assert tournament.runner_up_within_noise([untimed_intervals, winner], winner) is None


def test_inconclusive_candidates_are_not_failed_ones() -> None:
    """Before: an inconclusive candidate read 'failed validation: ... inconclusive'.
    Now its verdict is its own, and the error says some were inconclusive."""
    failed = Entrant("ort", "int8")
    failed.drop(tournament.FAILED_VALIDATION, "top-1 agreement 0.90 < 0.97")
    undecided = Entrant("ort", "fp16")
    undecided.drop(tournament.INCONCLUSIVE_VALIDATION, "about 381 samples would decide it")
    error = no_winner([failed, undecided], {})
    assert isinstance(error, AccuracyError)
    assert "some are inconclusive" in str(error)
    assert "ort fp16: inconclusive validation: about 381" in str(error)
    assert "ort int8: failed validation" in str(error)
    table = [c.verdict for c in ordered([failed, undecided])]
    assert table == [tournament.INCONCLUSIVE_VALIDATION, tournament.FAILED_VALIDATION]


def test_the_table_is_written_as_its_json_block_and_reads_back() -> None:
    """The tournament block keeps its keys and their order (each row: `name`, then the
    candidate's fields), and a saved block reads back as the same table."""
    candidates = field()
    winner = decide(candidates, batch_size=8)
    assert winner is not None
    table = TournamentTable(
        batch_size=8, duration_s=1.0, winner=winner.name, candidates=ordered(candidates)
    )
    document = json.loads(json.dumps(table.to_json()))
    assert list(document) == [
        "batch_size",
        "duration_s",
        "iterations",
        "threads",
        "rule",
        "winner",
        "within_noise_of",
        "candidates",
    ]
    row = document["candidates"][0]
    assert list(row)[:4] == ["name", "backend", "precision", "mode"]
    assert row["name"] == "openvino int8" and row["verdict"] == tournament.WINNER
    again = TournamentTable.from_json(document)
    assert again == table and again.to_json() == document
    assert again.timing_text() == "1 s" and tournament.SLOWER in again.verdicts()
