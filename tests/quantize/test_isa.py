"""The int8 class of described CPUs, the weight range chosen for them, and portability warnings."""

from __future__ import annotations

import pytest

from trtconv.artifact.manifest import QuantizationBlock
from trtconv.facts.hardware import CpuBlock
from trtconv.quantize import isa


def cpu(*features: str, arch: str = "x86_64") -> CpuBlock:
    """A CPU described as environment.cpu_info() does (only the named features present)."""
    return CpuBlock("described", arch, None, dict.fromkeys(features, True))


SAPPHIRE_RAPIDS = cpu("avx2", "avx512f", "avx512bw", "avx512_vnni", "amx_int8")
ALDER_LAKE = cpu("avx2", "fma", "avx_vnni")
EPYC_ZEN2 = cpu("avx2", "fma")
SKYLAKE_X = cpu("avx2", "avx512f", "avx512bw")  # AVX-512 but no VNNI: still vpmaddubsw
GRAVITON = cpu(arch="aarch64")


@pytest.mark.parametrize(
    ("described", "expected"),
    [
        (SAPPHIRE_RAPIDS, isa.X86_VNNI),
        (ALDER_LAKE, isa.X86_VNNI),
        (EPYC_ZEN2, isa.X86_NO_VNNI),
        (SKYLAKE_X, isa.X86_NO_VNNI),
        (GRAVITON, isa.ARM64),
        (CpuBlock(features={}), isa.OTHER),
        (CpuBlock(features={"avx2": True}), isa.X86_NO_VNNI),  # older descriptions have no arch
    ],
)
def test_cpu_int8_class(described: CpuBlock, expected: str) -> None:
    assert isa.cpu_int8_class(described) == expected


def test_this_cpu_has_a_class() -> None:
    assert isa.this_cpu_int8_class() in isa.CPU_CLASSES


@pytest.mark.parametrize(
    ("target", "here", "reduce_range"),
    [
        ("auto", isa.X86_NO_VNNI, True),
        ("auto", isa.X86_VNNI, False),
        ("auto", isa.ARM64, False),
        ("portable", isa.X86_VNNI, True),
        ("vnni", isa.X86_NO_VNNI, False),
    ],
)
def test_weight_range(target: str, here: str, reduce_range: bool) -> None:
    choice = isa.weight_range(target, here)
    assert choice.reduce_range is reduce_range and choice.target == target and choice.reason


def test_weight_range_refuses_unknown_target() -> None:
    with pytest.raises(ValueError, match="unknown int8 target 'avx2'"):
        isa.weight_range("avx2", isa.X86_VNNI)


FULL_RANGE = QuantizationBlock(scheme="u8s8", reduce_range=False)
SEVEN_BIT = QuantizationBlock(scheme="u8s8", reduce_range=True)


def test_vnni_validated_full_range_artifact_warns_on_a_cpu_without_vnni() -> None:
    here = isa.cpu_int8_class(EPYC_ZEN2)
    warning = isa.portability_warning(FULL_RANGE, isa.X86_VNNI, here, "digits-int8")
    assert warning is not None
    assert warning.startswith("digits-int8: int8 artifact validated on an x86-vnni CPU")
    assert "saturate" in warning and "--int8-target portable" in warning


def test_seven_bit_artifact_only_notes_the_unmeasured_class() -> None:
    warning = isa.portability_warning(SEVEN_BIT, isa.X86_VNNI, isa.X86_NO_VNNI, "m")
    assert warning is not None and "saturate" not in warning and "not measured" in warning
    measured = isa.portability_warning(SEVEN_BIT, isa.X86_VNNI, isa.X86_NO_VNNI, "m", True)
    assert measured is not None and "this run measures its accuracy here" in measured


@pytest.mark.parametrize(
    ("quantization", "validated_on", "here"),
    [
        (FULL_RANGE, isa.X86_VNNI, isa.X86_VNNI),  # same class: its validation holds
        (FULL_RANGE, isa.X86_NO_VNNI, isa.X86_NO_VNNI),  # validated where it saturates: measured
        # TensorRT's scheme: GPU kernels
        (QuantizationBlock(scheme="s8s8"), isa.X86_VNNI, isa.X86_NO_VNNI),
        (None, None, isa.X86_NO_VNNI),  # not an int8 artifact
        (FULL_RANGE, None, isa.X86_VNNI),  # unknown origin, but nothing saturates here
    ],
)
def test_no_warning(
    quantization: QuantizationBlock | None, validated_on: str | None, here: str
) -> None:
    assert isa.portability_warning(quantization, validated_on, here, "m") is None


def test_unknown_origin_full_range_warns_where_it_can_saturate() -> None:
    warning = isa.portability_warning(FULL_RANGE, None, isa.X86_NO_VNNI, "m")
    assert warning is not None and "of unknown origin" in warning


def test_seven_bit_pairs_cannot_saturate_int16() -> None:
    """The arithmetic the 7-bit choice rests on: vpmaddubsw adds two u8 x s8 products in int16."""
    int16_min, int16_max = -(2**15), 2**15 - 1
    assert int16_max < 255 * 127 * 2  # full range can saturate
    # ONNX Runtime's reduced int8 range is [-64, 64]: neither end of a pair sum can saturate.
    assert int16_min <= 255 * -64 * 2 and int16_max >= 255 * 64 * 2
