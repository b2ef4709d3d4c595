"""The int8 ladder record in words, shared by `convert` and the release report (no heavy
imports: the CLI loads this module)."""

from __future__ import annotations

from trtconv.quantize.ladder_result import FloatNode, LadderRecord


def budget_text(ladder: LadderRecord) -> str:
    """'top-1 agreement >= 0.97, accuracy drop <= 0.02' (and max abs error when judged)."""
    budget = ladder.budget
    parts = [
        f"top-1 agreement >= {budget.min_top1_agreement:g}",
        f"accuracy drop <= {budget.max_accuracy_drop:g}",
    ]
    if budget.atol is not None:
        parts.append(f"max abs error <= {budget.atol:g}")
    return ", ".join(parts)


def search_text(ladder: LadderRecord) -> str:
    """Where the ladder scored its steps, and that it was not the validation data."""
    search = ladder.search_data
    return (
        f"scored on {search.samples} samples of {search.part}: {search.drawn_from}, "
        "never the samples validated on"
    )


def kept_text(node: FloatNode) -> str:
    """A node kept in float: its TensorFlow layer (else ONNX name) and op type."""
    return f"{node.tf_layer or node.node} ({node.op_type})"
