"""The precisions trtconv converts to, as one enum.

`Precision` is a `str` enum: a member equals its name as a string (`Precision.INT8 == "int8"`), so
manifests, JSON documents and command lines keep plain strings while code compares members.
"""

from __future__ import annotations

from enum import Enum


class Precision(str, Enum):
    """A conversion precision. TF32 is FP32 with tensor-core math allowed, not a storage type."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


PRECISIONS: tuple[str, ...] = tuple(p.value for p in Precision)
