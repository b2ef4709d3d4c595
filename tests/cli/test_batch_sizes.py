"""--batch-sizes is read by one parser for convert, bench and train --benchmark --grid."""

from __future__ import annotations

import pytest

from trtconv.cli._options import parse_batch_sizes
from trtconv.cli.train import _benchmark_options
from trtconv.core.errors import UsageError
from trtconv.options.train import TrainOptions


def test_batch_sizes_are_positive_integers_each_once() -> None:
    assert parse_batch_sizes("32, 64") == (32, 64)
    assert parse_batch_sizes("1,8,1,") == (1, 8)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("32,x", "--batch-sizes takes integers like 1,8,32: 'x' is not an integer."),
        ("0,4", "--batch-sizes takes sizes of at least 1, found 0."),
        (",", "--batch-sizes takes positive integers like 1,8,32, found ','."),
    ],
)
def test_bad_batch_sizes_are_one_usage_error(text: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_batch_sizes(text)
    assert str(caught.value) == message


def test_the_grid_falls_back_to_batch_size_then_the_models_own() -> None:
    counts = (None, None)
    grid = _benchmark_options(TrainOptions(batch_size=8), None, counts, True, "32,64")
    assert grid.batch_sizes == (32, 64)
    assert _benchmark_options(TrainOptions(batch_size=8), None, counts, True, None).batch_sizes == (
        8,
    )
    assert _benchmark_options(TrainOptions(), None, counts, True, None).batch_sizes is None
