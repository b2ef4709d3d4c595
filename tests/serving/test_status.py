"""The doctor's `serving` section: whether `trtconv serve` can run here, and why not."""

from __future__ import annotations

from trtconv.doctor import doctor
from trtconv.serving.status import serving_reason


def test_reasons_name_the_missing_piece() -> None:
    assert serving_reason("0.7.0", "2.36") == ""
    assert "glibc 2.35 or newer, this machine has 2.31" in serving_reason("0.7.0", "2.31")
    assert "trtconv[serve]" in serving_reason(None, "2.36")
    assert "glibc Linux only" in serving_reason(None, None)


def test_doctor_reports_serving() -> None:
    section = doctor(deep=False).sections["serving"]
    assert section["usable"] is (section["reason"] == "")
    assert section["row"]["component"] == "Serving (PyTriton)"
