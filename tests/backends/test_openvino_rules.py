"""OpenVINO's support rules on described machines: fp32 anywhere it is installed, int8 with NNCF,
bf16 and fp16 only on CPUs that compute them natively; `auto` finds it for bf16."""

from __future__ import annotations

import pytest

from trtconv.backends import registry
from trtconv.core.errors import MissingDependencyError
from trtconv.facts import Facts, described

INSTALLED = {"openvino": "2026.4.1", "nncf": "3.4.0"}
EPYC_AVX2 = described(cpu="AMD EPYC (AVX2)", libraries=INSTALLED)
SAPPHIRE_RAPIDS = described(
    cpu="Intel Xeon (Sapphire Rapids)",
    cpu_features=(
        "avx2",
        "fma",
        "avx512f",
        "avx512_vnni",
        "avx512_bf16",
        "avx512_fp16",
        "amx_bf16",
        "amx_int8",
    ),
    libraries=INSTALLED,
)


def ok(precision: str, facts: Facts) -> bool:
    return registry.support("openvino", precision, facts).ok


def test_fp32_and_int8_run_on_any_cpu_bf16_and_fp16_only_where_native() -> None:
    assert [ok(p, EPYC_AVX2) for p in ("fp32", "int8", "bf16", "fp16")] == [1, 1, 0, 0]
    assert all(ok(p, SAPPHIRE_RAPIDS) for p in ("fp32", "int8", "bf16", "fp16"))
    with pytest.raises(MissingDependencyError) as caught:
        registry.support("openvino", "bf16", EPYC_AVX2).require()
    message = str(caught.value)
    assert "avx512_bf16 or amx_bf16" in message and "AMD EPYC (AVX2) has neither" in message
    assert not ok("tf32", SAPPHIRE_RAPIDS)  # not a CPU precision: no such mode


def test_not_installed_names_the_extra_and_int8_needs_nncf() -> None:
    bare = described(libraries={"openvino": None, "nncf": None})
    with pytest.raises(MissingDependencyError, match=r"pip install 'trtconv\[openvino\]'"):
        registry.support("openvino", "fp32", bare).require()
    no_nncf = described(libraries={"openvino": "2026.4.1", "nncf": None})
    assert ok("fp32", no_nncf) and not ok("int8", no_nncf)
    assert "NNCF" in registry.support("openvino", "int8", no_nncf).reason


def test_auto_keeps_ort_for_fp32_and_int8_and_finds_openvino_for_bf16() -> None:
    assert registry.choose("fp32", SAPPHIRE_RAPIDS)[0] == "ort"
    assert registry.choose("int8", SAPPHIRE_RAPIDS)[0] == "ort"
    backend, reason = registry.choose("bf16", SAPPHIRE_RAPIDS)
    assert backend == "openvino" and "ort (ort has no bf16 mode)" in reason


def test_int8_float_parts_are_bf16_only_for_this_cpu_where_it_computes_bf16() -> None:
    """OpenVINO's own default on a bf16 CPU (an int8 BERT-base ran 1.85x faster so than with
    f32 float parts); f32, which every CPU computes alike, for another target or CPU."""
    from trtconv.backends.openvino.rules import int8_float_parts

    assert int8_float_parts("auto", SAPPHIRE_RAPIDS.cpu.features) == "bf16"
    assert int8_float_parts("auto", {"avx2", "avx512f", "amx_bf16"}) == "bf16"
    assert int8_float_parts("auto", EPYC_AVX2.cpu.features) == "f32"
    assert int8_float_parts("portable", SAPPHIRE_RAPIDS.cpu.features) == "f32"
    assert int8_float_parts("vnni", SAPPHIRE_RAPIDS.cpu.features) == "f32"
