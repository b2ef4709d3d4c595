"""Signal models for mixed float16: an audio front end whose spectral powers lie below
float16's smallest normal value, and a Keras 2 model that nests a revived model, whose op names
carry the function calls of its layers. Built once per test session (cached functions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.helpers.model_cache import built_once, shared_dir

# Framed audio: FRAMES frames of FRAME samples; a quiet recording (noise at NOISE, -80 dBFS) in
# which each of NOTES tones (TONE amplitude, -60 dBFS) sounds in some frames. The front end's
# spectral powers are ~1e-11 (noise) to ~1e-7 (tones): below float16's smallest normal value
# 6.1e-5, mostly below its smallest subnormal 6e-8, and the floor FLOOR (1e-8) itself rounds
# to 0 in float16.
FRAMES, FRAME, BINS = 24, 64, 16
NOTE_BINS = (3, 7, 11)
NOISE, TONE, FLOOR = 1e-4, 1e-3, 1e-8
AUDIO_LAYERS = ("stft", "power", "magnitude", "norm", "conv", "notes")


def framed_signal(samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(frames [samples, FRAMES, FRAME], notes [samples, FRAMES, len(NOTE_BINS)] in {0, 1}):
    noise with tones at the NOTE_BINS frequencies, each on in a random run of frames."""
    rng = np.random.default_rng(seed)
    frames = rng.normal(0, NOISE, (samples, FRAMES, FRAME))
    notes = np.zeros((samples, FRAMES, len(NOTE_BINS)))
    time = np.arange(FRAME) / FRAME
    for sample in range(samples):
        for index, cycles in enumerate(NOTE_BINS):
            if rng.random() < 0.4:
                continue
            start = int(rng.integers(0, FRAMES - 4))
            end = int(rng.integers(start + 3, FRAMES + 1))
            phase = rng.uniform(0, 2 * np.pi)
            frames[sample, start:end] += TONE * np.sin(2 * np.pi * cycles * time + phase)
            notes[sample, start:end, index] = 1.0
    return frames.astype(np.float32), notes.astype(np.float32)


def stft_basis() -> np.ndarray:
    """[FRAME, 2 * BINS]: Hann-windowed cosines then sines of bins 0..BINS-1, over FRAME (a
    short-time Fourier transform's real and imaginary parts, scaled like a normalised one)."""
    time = np.arange(FRAME)
    window = np.hanning(FRAME)
    angles = 2 * np.pi * np.outer(time, np.arange(BINS)) / FRAME
    basis = np.concatenate([np.cos(angles), np.sin(angles)], axis=1) * window[:, None] / FRAME
    return basis.astype(np.float32)


def build_audio_model() -> object:
    """frames -> dense 'stft' (fixed STFT basis) -> square 'power' -> dense 'magnitude' (re^2 +
    im^2, fixed) -> log(x + FLOOR) -> LayerNormalization 'norm' over time and frequency -> conv
    'conv' (relu) -> conv 'notes': per-frame note logits [N, FRAMES, notes]."""
    import keras

    layers = keras.layers
    frames = keras.Input((FRAMES, FRAME), name="frames")
    spectrum = layers.Dense(2 * BINS, use_bias=False, trainable=False, name="stft")(frames)
    power = layers.Activation(keras.ops.square, name="power")(spectrum)
    pairs = np.concatenate([np.eye(BINS), np.eye(BINS)]).astype(np.float32)
    magnitude = layers.Dense(BINS, use_bias=False, trainable=False, name="magnitude")
    logs = layers.Activation(lambda x: keras.ops.log(x + FLOOR), name="log")(magnitude(power))
    x = layers.LayerNormalization(axis=[1, 2], name="norm")(logs)
    x = layers.Conv1D(8, 3, padding="same", activation="relu", name="conv")(x)
    model = keras.Model(frames, layers.Conv1D(len(NOTE_BINS), 1, name="notes")(x))
    model.get_layer("stft").set_weights([stft_basis()])
    magnitude.set_weights([pairs])
    return model


@built_once
def audio_model() -> Path:
    """The audio model trained briefly on framed_signal; its SavedModel, serving_default(frames)
    -> {notes: sigmoid probabilities [N, FRAMES, notes]}."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    frames, notes = framed_signal(600, seed=0)
    model = build_audio_model()
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
    )
    model.fit(frames, notes, epochs=15, batch_size=32, verbose=0)
    spec = tf.TensorSpec([None, FRAMES, FRAME], tf.float32, name="frames")

    @tf.function(input_signature=[spec])
    def serve(frames: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"notes": tf.sigmoid(model(frames, training=False))}

    module = tf.Module()
    module.model = model  # tracked: its variables are saved with the module
    module.serve = serve
    path = shared_dir() / "audio" / "saved_model"
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return path


@built_once
def audio_npz(samples: int = 256, seed: int = 1) -> Path:
    """framed_signal as an .npz with one array `x` (no labels)."""
    frames, _ = framed_signal(samples, seed)
    path = shared_dir() / f"audio-{samples}-{seed}.npz"
    np.savez(path, x=frames)
    return path


@built_once
def nested_keras2_model() -> Path:
    """A Keras 2 (tf_keras) model that calls a revived model: 'front' (a functional model with
    a custom layer 'cqt': log(square(x @ w) + FLOOR)) saved as a SavedModel and loaded back
    without its class, then called inside 'model' before a dense 'head'; saved as a SavedModel.
    Its ops inside 'cqt' are named "model/front/cqt/StatefulPartitionedCall/
    StatefulPartitionedCall/...": the revived layer calls its saved function."""
    import tensorflow as tf
    import tf_keras as keras

    class Cqt(keras.layers.Layer):  # type: ignore[misc]
        def build(self, shape: tuple[int, ...]) -> None:
            self.w = self.add_weight(name="w", shape=(shape[-1], 8))

        def call(self, x: tf.Tensor) -> tf.Tensor:
            return tf.math.log(tf.square(tf.matmul(x, self.w)) + FLOOR)

    keras.utils.set_random_seed(0)
    features = keras.Input((FRAME,), name="features")
    front = keras.Model(features, Cqt(name="cqt")(features), name="front")
    front.get_layer("cqt").set_weights([stft_basis()[:, :8]])
    front.save(str(shared_dir() / "front"))
    revived = keras.models.load_model(str(shared_dir() / "front"))
    x = keras.Input((FRAME,), name="x")
    model = keras.Model(x, keras.layers.Dense(4, name="head")(revived(x)), name="model")
    path = shared_dir() / "nested" / "saved_model"
    model.save(str(path))
    return path
