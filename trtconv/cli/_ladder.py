"""How `convert` shows the int8 precision ladder it climbed (trtconv.quantize.ladder)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from trtconv.quantize.ladder_result import LadderRecord, LadderSpeed, LadderStep
from trtconv.quantize.ladder_text import budget_text, kept_text, search_text


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def _mark(step: LadderStep, chosen: int) -> str:
    if step.meets_budget is None:
        return ""
    mark = "[green]✓[/green]" if step.meets_budget else "[red]✗[/red]"
    return f"{mark} chosen" if step.step == chosen else mark


def ladder_table(ladder: LadderRecord) -> Table:
    """One row per step: what changed, agreement and accuracy on the search slice, time."""
    table = Table(box=None, padding=(0, 1), show_edge=False)
    for header in ("step", "stage", "change", "agreement", "accuracy", "s", ""):
        table.add_column(header, justify="right" if header in ("step", "s") else "left")
    for step in ladder.steps:
        table.add_row(
            str(step.step),
            step.stage,
            escape(step.change),
            _number(step.top1_agreement),
            _number(step.accuracy),
            f"{step.seconds:.1f}",
            _mark(step, ladder.chosen_step),
        )
    return table


def speed_lines(speed: LadderSpeed) -> list[str]:
    """One line per batch size: fp32, full int8 and chosen latencies, speed relative to fp32."""
    lines = []
    for row in speed.rows:
        text = (
            f"batch {row.batch_size}: fp32 {row.fp32_latency_ms:.3f} ms, full int8 "
            f"{row.full_int8_latency_ms:.3f} ms ({row.full_int8_speedup_vs_fp32:.2f}x fp32)"
        )
        chosen = row.chosen_latency_ms
        if chosen is not None:
            text += f", chosen {chosen:.3f} ms ({row.speedup_vs_fp32:.2f}x fp32)"
        lines.append(text)
    return lines


def render_ladder(ladder: LadderRecord, console: Console) -> None:
    """The ladder under the conversion line of `trtconv convert`."""
    if not console.is_terminal:
        # Piped output defaults to 80 columns, which would fold every cell: give the table room.
        console = Console(file=console.file, width=max(console.width, 132))
    console.print(
        f"  int8 ladder: {escape(ladder.outcome)} ({ladder.seconds:.1f} s, limit "
        f"{ladder.time_limit_s:g} s)",
        highlight=False,
    )
    console.print(
        f"    budget {budget_text(ladder)}, {escape(search_text(ladder))}", highlight=False
    )
    if ladder.search_data.note:
        note = escape(ladder.search_data.note)
        console.print(f"    [yellow]note:[/yellow] {note}", highlight=False)
    console.print(Padding(ladder_table(ladder), (0, 0, 0, 4), expand=False), highlight=False)
    if ladder.kept_float:
        kept = ", ".join(escape(kept_text(node)) for node in ladder.kept_float)
        console.print(f"    kept in float: {kept}", highlight=False)
    speed = ladder.speed
    if speed:
        console.print(f"    speed ({escape(speed.method)}):", highlight=False)
        for line in speed_lines(speed):
            console.print(f"      {line}", highlight=False)
        for note in speed.notes:
            console.print(f"    [yellow]note:[/yellow] {escape(note)}", highlight=False)
