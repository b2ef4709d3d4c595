"""Text models as a team on today's TensorFlow makes them: keras-hub's own architectures (a GPT-2
language model, a BERT token tagger and its backbone) in tiny configurations, trained for a few
seconds on synthetic token tasks and exported with Keras 3's `model.export`, fed `token_ids`
(`segment_ids`) and `padding_mask` as int32. Half of every batch is padded.

keras-hub 0.32 installs at the newest end of the TensorFlow range only (it requires
tensorflow-text >= 2.20.1, which requires TensorFlow >= 2.20): `KERAS_HUB` skips the tests that
need it elsewhere, saying why. Each model is built once for all workers (`built_once`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.model_cache import built_once, shared_dir
from tests.helpers.tensorflow_range import TENSORFLOW_VERSION

VOCAB, SEQ, HIDDEN, TAGS = 256, 16, 32, 5
SAMPLES = 600  # 128 calibrate, the rest validate
CONFIG = {"num_layers": 2, "num_heads": 2, "hidden_dim": HIDDEN, "intermediate_dim": 64}


def _major_minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


KERAS_HUB = pytest.mark.skipif(
    _major_minor(TENSORFLOW_VERSION or "0.0") < (2, 20),
    reason=(
        f"keras-hub 0.32 requires tensorflow-text >= 2.20.1, hence TensorFlow >= 2.20; this is "
        f"TensorFlow {TENSORFLOW_VERSION} (the dev-text extra installs at the newest end only)"
    ),
)


def tokens(samples: int = SAMPLES, seed: int = 0, padding: str = "pad") -> dict[str, np.ndarray]:
    """Random token ids (1..VOCAB-1) of SEQ positions, every second sample padded after 4 to 15
    tokens (its `padding_mask` 0 there). `padding`: what fills the padded positions' ids, "pad"
    (0, as keras-hub's preprocessors pad) or "garbage" (random ids the mask hides)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, (samples, SEQ)).astype(np.int32)
    mask = np.ones((samples, SEQ), np.int32)
    lengths = rng.integers(4, SEQ, samples)
    for row in range(1, samples, 2):
        mask[row, lengths[row] :] = 0
    filler = rng.integers(1, VOCAB, ids.shape) if padding == "garbage" else 0
    ids = np.where(mask == 0, filler, ids).astype(np.int32)
    return {"token_ids": ids, "padding_mask": mask}


def next_tokens(ids: np.ndarray) -> np.ndarray:
    """The language model's task: the next token is 3 x this one + 1 (mod VOCAB)."""
    return (ids * 3 + 1) % VOCAB


def tags(ids: np.ndarray) -> np.ndarray:
    """The tagger's task: each token's tag is its id mod TAGS."""
    return (ids % TAGS).astype(np.int64)


def save_tokens(name: str, arrays: dict[str, np.ndarray]) -> Path:
    path = shared_dir() / name
    np.savez(path, **arrays)
    return path


@built_once
def gpt2_tokens_npz(seed: int = 0, padding: str = "pad") -> Path:
    """tokens(seed, padding) as an .npz (token_ids, padding_mask): seed 0 calibrates, another
    seed's are held out."""
    return save_tokens(f"gpt2_tokens_{seed}_{padding}.npz", tokens(seed=seed, padding=padding))


@built_once
def bert_tokens_npz(seed: int = 0) -> Path:
    """tokens(seed) with segment_ids (all 0) and the tags as labels (`y`), as an .npz."""
    arrays = tokens(seed=seed)
    arrays["segment_ids"] = np.zeros_like(arrays["token_ids"])
    arrays["y"] = tags(arrays["token_ids"])
    return save_tokens(f"bert_tokens_{seed}.npz", arrays)


def _compile(model: object) -> None:
    import keras

    model.compile(  # type: ignore[attr-defined]
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )


@built_once
def gpt2_model() -> Path:
    """A GPT-2 causal language model (2 layers, hidden 32, vocabulary 256: logits
    [batch, seq, 256]) trained for an epoch on next_tokens, exported with `model.export`."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCAB, max_sequence_length=SEQ, **CONFIG
    )
    model = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    _compile(model)
    data = tokens(seed=1)
    mask = data["padding_mask"]
    # One epoch: its logits stay close enough that int8 and fp16 change a few tokens in a
    # thousand (measured: agreement 0.998 and 0.999), so the counts checked are not all ones.
    model.fit(data, next_tokens(data["token_ids"]), sample_weight=mask, epochs=1, verbose=0)
    path = shared_dir() / "gpt2"
    model.export(str(path), format="tf_saved_model", verbose=False)
    return path


@built_once
def bert_models() -> Path:
    """A BERT token tagger (its backbone's sequence output into a Dense of TAGS logits:
    [batch, seq, 5], which nothing in its shape says are class scores) trained on tags, under
    `tagger/`, and its trained backbone (`pooled_output` [batch, 32], a tanh embedding, and
    `sequence_output` [batch, seq, 32]) under `backbone/`."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, max_sequence_length=SEQ, **CONFIG
    )
    names = ("token_ids", "segment_ids", "padding_mask")
    inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in names}
    logits = keras.layers.Dense(TAGS)(backbone(inputs)["sequence_output"])
    tagger = keras.Model(inputs, logits)
    _compile(tagger)
    data = tokens(seed=1)
    data["segment_ids"] = np.zeros_like(data["token_ids"])
    mask = data["padding_mask"]
    tagger.fit(data, tags(data["token_ids"]), sample_weight=mask, epochs=2, verbose=0)
    root = shared_dir() / "bert"
    tagger.export(str(root / "tagger"), format="tf_saved_model", verbose=False)
    backbone.export(str(root / "backbone"), format="tf_saved_model", verbose=False)
    return root
