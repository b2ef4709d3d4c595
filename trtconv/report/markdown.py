"""The one Markdown renderer of every report trtconv writes: bench's report.md
(trtconv.report.writers), the merged report.md (trtconv.report.merged_report) and release.md
(trtconv.release.markdown). Each report says what it holds as blocks of lines; titles,
sections, lists, tables and plots are drawn here, the same way in each."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def heading(text: str, level: int = 2) -> list[str]:
    """A heading (level 1: the report's title), then a blank line."""
    return ["#" * level + f" {text}", ""]


def section(title: str, lines: Iterable[str], level: int = 2) -> list[str]:
    """A heading, the section's lines and a blank line after them."""
    return [*heading(title, level), *lines, ""]


def bullets(items: Iterable[str]) -> list[str]:
    """A list: one `- item` line each."""
    return [f"- {item}" for item in items]


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A table's lines: header, separator, one line per row of text cells."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows]


def plots(images: Sequence[tuple[str, str]]) -> list[str]:
    """The Plots section, one image per (alt text, path); nothing when there are none."""
    return section("Plots", (f"![{alt}]({path})" for alt, path in images)) if images else []


def document(*blocks: Iterable[str]) -> str:
    """The report: its blocks' lines joined, in order."""
    return "\n".join(line for block in blocks for line in block)
