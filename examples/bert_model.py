"""A BERT backbone built from keras-hub's configuration, random weights (no downloads), exported
as a SavedModel, and token data for it (BENCHMARKS.md).

    python examples/bert_model.py OUT_DIR [--size base|small|tiny] [--sequence 128]
                                  [--calib 512] [--held-out 256]

`base` is keras-hub 0.32's BERT-base configuration (`bert_base_en`: 12 layers, 12 heads, hidden
768, intermediate 3072, vocabulary 30522, 512 positions, 2 segments); `small` (4 layers, hidden
256) and `tiny` (2 layers, hidden 64) are the same architecture, smaller. The backbone is
exported with Keras 3's `model.export`: inputs `token_ids`, `segment_ids`, `padding_mask` (int32,
any batch and length), outputs `sequence_output [batch, length, hidden]` and `pooled_output
[batch, hidden]`. Writes OUT_DIR/saved_model, OUT_DIR/calib.npz and OUT_DIR/held_out.npz: each
sequence is `--sequence` tokens long with a real length drawn between a quarter of it and all of
it (padding_mask 1 up to that length, token id 0 and mask 0 after it), a [CLS]-like first token
and a [SEP]-like last one, and the second half of its tokens in segment 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SIZES = {
    "base": {"num_layers": 12, "num_heads": 12, "hidden_dim": 768, "intermediate_dim": 3072},
    "small": {"num_layers": 4, "num_heads": 4, "hidden_dim": 256, "intermediate_dim": 1024},
    "tiny": {"num_layers": 2, "num_heads": 2, "hidden_dim": 64, "intermediate_dim": 128},
}
VOCABULARY, POSITIONS, SEGMENTS = 30522, 512, 2
CLS, SEP = 101, 102  # bert_base_en's [CLS] and [SEP] ids


def build(output: Path, size: str) -> None:
    """The backbone of `size`, seeded, exported to OUTPUT/saved_model."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCABULARY,
        max_sequence_length=POSITIONS,
        num_segments=SEGMENTS,
        **SIZES[size],
    )
    backbone.export(str(output / "saved_model"), verbose=False)


def tokens(count: int, sequence: int, seed: int) -> dict[str, np.ndarray]:
    """`count` padded sequences of `sequence` tokens (see the module docstring)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(max(2, sequence // 4), sequence + 1, count)
    positions = np.arange(sequence)
    mask = positions[None, :] < lengths[:, None]
    ids = rng.integers(1000, VOCABULARY, (count, sequence))
    ids[:, 0] = CLS
    ids[np.arange(count), lengths - 1] = SEP
    segments = (positions[None, :] >= (lengths[:, None] // 2)) & mask
    return {
        "token_ids": np.where(mask, ids, 0).astype(np.int32),
        "segment_ids": segments.astype(np.int32),
        "padding_mask": mask.astype(np.int32),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--size", choices=sorted(SIZES), default="base")
    parser.add_argument("--sequence", type=int, default=128)
    parser.add_argument("--calib", type=int, default=512)
    parser.add_argument("--held-out", type=int, default=256)
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    build(args.output, args.size)
    np.savez(args.output / "calib.npz", **tokens(args.calib, args.sequence, seed=1))
    np.savez(args.output / "held_out.npz", **tokens(args.held_out, args.sequence, seed=2))
    written = {"saved_model": str(args.output / "saved_model"), "size": args.size}
    print(json.dumps(written | SIZES[args.size]))


if __name__ == "__main__":
    main()
