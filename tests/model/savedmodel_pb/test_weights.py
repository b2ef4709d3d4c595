"""A SavedModel's float weights read from saved_model.pb without TensorFlow: the shapes a text
model's hidden size is inferred from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.text_fixtures import HIDDEN, KERAS_HUB, TAGS, VOCAB, bert_models, gpt2_model
from trtconv.model.savedmodel_pb.weights import weight_shapes
from trtconv.outputs.tokens import hidden_size


@pytest.mark.tensorflow
@KERAS_HUB
def test_the_weights_of_keras_hub_models_give_their_hidden_size() -> None:
    for model in (gpt2_model(), bert_models() / "tagger", bert_models() / "backbone"):
        shapes = weight_shapes(model)
        assert (VOCAB, HIDDEN) in shapes  # the token embedding
        assert all(len(shape) <= 3 for shape in shapes)
        assert hidden_size(shapes) == HIDDEN
    assert (HIDDEN, TAGS) in weight_shapes(bert_models() / "tagger")  # the tagger's head


def test_a_file_that_cannot_be_read_has_no_weights(tmp_path: Path) -> None:
    assert weight_shapes(tmp_path) == []  # no saved_model.pb
    (tmp_path / "saved_model.pb").write_bytes(b"\xff\xff\xff")
    assert weight_shapes(tmp_path) == []
