"""How `convert` shows the mixed float16 model it built (trtconv.onnxlib.fp16_model): what stayed
float32 and why, and what float16 emulation measured."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from trtconv.onnxlib.fp16_record import Fp16Summary, KeptNode, OutputError


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


def kept_by_layer(kept: list[KeptNode]) -> list[str]:
    """'LAYER: OP, OP (why of its first node)' per TensorFlow layer (else ONNX node), in order."""
    layers: dict[str, list[KeptNode]] = {}
    for node in kept:
        layers.setdefault(node.tf_layer or node.node, []).append(node)
    return [
        f"{layer}: {', '.join(n.op_type for n in nodes)} ({nodes[0].why})"
        for layer, nodes in layers.items()
    ]


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
    console.print(
        f"    rule: float32 where |x| > {block.range_limit:g} or a node's float16 error "
        f"> {block.loss_limit:g} and {block.loss_growth:g}x its inputs'",
        highlight=False,
    )
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
