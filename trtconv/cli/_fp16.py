"""How `convert` shows the mixed float16 model it built (trtconv.onnxlib.fp16_model): what stayed
float32 and why, and what float16 emulation measured."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from trtconv.onnxlib.fp16_result import Fp16Summary, KeptNode, OutputError


def output_text(measured: OutputError) -> str:
    """One output as the emulation measured it: its top-1 agreement with float32 (its relative
    error for outputs without classes), and the values that overflowed."""
    agreement = measured.top1_agreement
    if agreement is not None:
        text = f"top-1 agreement {agreement:.4f}"
    elif measured.relative_error is not None:
        text = f"relative error {measured.relative_error:.2g}"
    else:
        text = "not finite"
    if measured.nonfinite:
        text += f" ({measured.nonfinite} values inf or NaN)"
    return text


def rule_lines(block: Fp16Summary) -> list[str]:
    """The keep-float32 rule, with the limits the block records (blocks written before the
    underflow and cancellation rules have neither `tiny_limit` nor `cancellation_limit`)."""
    lines = [f"float32 where |x| > {block.range_limit:g}"]
    if block.tiny_limit is not None and block.small_share is not None:
        lines.append(
            f"where a Log, division, Sqrt or normalisation reads values below "
            f"{block.tiny_limit:.2g} (over {block.small_share:.0%} of them)"
        )
    if block.cancellation_limit is not None:
        lines.append(
            f"where an Add or Sub cancels (inputs {block.cancellation_limit:g}x its output)"
        )
    lines.append(
        f"where a node's float16 error > {block.loss_limit:g} and "
        f"{block.loss_growth:g}x its inputs'"
    )
    return [f"{line};" for line in lines[:-1]] + [lines[-1]]


def kept_by_layer(kept: list[KeptNode]) -> list[str]:
    """'LAYER: OP, OP (why)' per TensorFlow layer (else ONNX node), in order: the why of its
    first node a rule kept for itself, else of its first node (kept as it feeds another)."""
    layers: dict[str, list[KeptNode]] = {}
    for node in kept:
        layers.setdefault(node.tf_layer or node.node, []).append(node)
    tf_ops = {node.node: node.tf_op for node in kept if node.tf_op}
    lines = []
    for layer, nodes in layers.items():
        whys = [n.why for n in nodes if "feeds " not in n.why] or [nodes[0].why]
        why = whys[0]
        for name, tf_op in tf_ops.items():  # "feeds NODE": the TensorFlow op, shorter
            why = why.replace(f"feeds {name} ", f"feeds {tf_op} ")
        lines.append(f"{layer}: {', '.join(n.op_type for n in nodes)} ({why})")
    return lines


def render_fp16(block: Fp16Summary, console: Console) -> None:
    """The fp16 block under the conversion line of `trtconv convert`."""
    if not console.is_terminal:  # piped: 80 columns would fold every line
        console = Console(file=console.file, width=max(console.width, 132))
    share = block.float16_share
    validated = block.validated_by
    console.print(
        f"  fp16: {block.float16_nodes} of {block.nodes} nodes float16 ({share:.0%}), "
        f"{block.float32_nodes} kept float32"
        + (f"; validated by {escape(validated)}" if validated else ""),
        highlight=False,
    )
    rule = rule_lines(block)
    console.print(f"    rule: {rule[0]}", highlight=False)
    for line in rule[1:]:
        console.print(f"      {line}", highlight=False)
    emulated = block.emulated_outputs
    samples = block.analysis_samples
    for name, plain in emulated.plain_float16.items():
        mixed = emulated.mixed[name]
        console.print(
            f"    {escape(name)}, emulated on {samples} calibration samples: plain float16 "
            f"{output_text(plain)};\n      this mixed model {output_text(mixed)}",
            highlight=False,
        )
    for line in kept_by_layer(block.kept_float32):
        console.print(f"    float32: {escape(line)}", highlight=False)
