"""The human rendering when stdout is not a terminal (piped, the `best` table was
folded to 80 columns, one word per line)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from trtconv.cli._ladder import render_ladder
from trtconv.cli._output import PIPED_WIDTH, emit_result, stdout_console
from trtconv.cli.convert import render_tournament
from trtconv.convert.tournament import Entrant, TournamentTable
from trtconv.quantize.ladder_result import LadderRecord

REASON = (
    "slower than the winner at batch 8 by 1.37x; its int8 validation passed on 512 held-out "
    "samples with a top-1 agreement of 0.9961 (interval 0.9870-0.9989)"
)


def _tournament() -> TournamentTable:
    row = {
        "throughput_per_s": 1234.5,
        "latency_ms_p50": 0.812,
        "speedup_vs_native": 2.31,
        "top1_agreement": 0.99609375,
    }
    return TournamentTable(
        batch_size=8,
        iterations=200,
        candidates=[
            Entrant("openvino", "int8", verdict="winner", reason="fastest that passed", **row),
            Entrant("ort", "int8 (u8s8, 7-bit weights)", verdict="lost", reason=REASON, **row),
        ],
    )


def test_piped_tables_keep_each_row_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def render(result: TournamentTable, console: Console) -> None:
        render_tournament(result, console)

    emit_result(_tournament(), False, render)
    lines = capsys.readouterr().out.splitlines()
    row = [line for line in lines if "ort int8 (u8s8, 7-bit weights)" in line]
    assert len(row) == 1, lines
    assert REASON in row[0] and "0.9961" in row[0] and "1,234.5" in row[0]
    assert max(len(line) for line in lines) < PIPED_WIDTH


def test_the_console_is_wide_only_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    assert not stdout_console().is_terminal and stdout_console().width >= PIPED_WIDTH


def _ladder() -> dict[str, Any]:
    step = {
        "stage": "scheme",
        "accuracy": None,
        "seconds": 12.345,
        "meets_budget": False,
        "kept_float": 0,
    }
    return {
        "outcome": "budget not met: time limit reached during the scheme variants",
        "seconds": 598.2,
        "time_limit_s": 600.0,
        "budget": {"min_top1_agreement": 0.97, "max_accuracy_drop": 0.02, "atol": None},
        "search_data": {
            "samples": 512,
            "part": "digits[train][300:812]",
            "note": None,
            "drawn_from": "held-out samples beyond those validated on",
            "reference": "the float ONNX export",
        },
        "steps": [
            {**step, "step": 0, "change": "u8s8, minmax", "top1_agreement": 0.9885579},
            {**step, "step": 1, "change": "7-bit weights", "top1_agreement": 0.9612},
        ],
        "chosen_step": 0,
        "scheme": "u8s8, minmax",
        "met_budget": False,
        "kept_float": [],
        "speed": None,
    }


def test_piped_ladder_lines_carry_no_padding(capsys: pytest.CaptureFixture[str]) -> None:
    def render(result: dict[str, Any], console: Console) -> None:
        render_ladder(LadderRecord.from_json(result), console)

    emit_result(_ladder(), False, render)
    lines = capsys.readouterr().out.splitlines()
    assert any("0.9886" in line and "7-bit" not in line for line in lines), lines
    # Nothing is padded out to the piped console's width: the table is as wide as its cells.
    assert max(len(line) for line in lines) < 200, [len(line) for line in lines]
