"""release.md's serving section: each model served under load ([serving]) and the Triton
repository written for the recommended artifact ([deploy])."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trtconv.serving.load.latency import p99_interval_text

if TYPE_CHECKING:
    from trtconv.release.document import ReleaseResult


def _ms(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"


def serving_section(document: ReleaseResult) -> list[str]:
    """The serving table (native first, then each target), its notes and the repository;
    nothing when the release served nothing and deployed nothing."""
    serving = document.serving
    lines: list[str] = []
    if serving:
        budget = serving.latency_budget_ms
        names = ["native", *(t.id for t in document.targets if t.serving)]
        lines += [
            f"## Serving (p99 budget {budget:g} ms)",
            "",
            "| model | queries/s at budget | p50 ms | p99 ms | p99 95% interval | LoadGen "
            "| batches formed (size: runs) |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, row in zip(names, serving.rows, strict=False):
            qps = f"{row.qps_at_budget:.1f}" if row.qps_at_budget else "none met it"
            batches = ", ".join(f"{size}: {count}" for size, count in row.batches.items())
            cells = [
                name,
                qps,
                _ms(row.latency_ms_p50),
                _ms(row.latency_ms_p99),
                p99_interval_text(row.latency_ms_p99_ci95, "–"),
                row.loadgen_result or "–",
                batches or "–",
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", *(f"- {note}" for note in serving.notes), ""]
    if document.triton_repository:
        lines += [
            f"Triton model repository of the recommendation: `{document.triton_repository}/` "
            "(see docs/serving.md to load it in a Triton server).",
            "",
        ]
    return lines
