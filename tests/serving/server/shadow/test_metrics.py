"""The shadow check's metrics, read back by Prometheus' own text parser, and the page that
serves them after Triton's."""

from __future__ import annotations

import http.server
import math
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from trtconv.serving.server.shadow.check import ShadowResult
from trtconv.serving.server.shadow.metrics import MetricsPage, render
from trtconv.serving.server.shadow.verdict import FAILING, UNDECIDED, FigureVerdict

TRITON_PAGE = (
    "# HELP nv_inference_count Number of inferences performed\n"
    "# TYPE nv_inference_count counter\n"
    'nv_inference_count{model="digits",version="1"} 412\n'
)


def result() -> ShadowResult:
    figures = [
        FigureVerdict(
            output="probabilities",
            figure="top-1 agreement",
            successes=130.0,
            samples=160,
            share=0.8125,
            share_ci95=(0.745, 0.865),
            minimum=0.97,
            state=FAILING,
            samples_needed=0,
            changed_at_samples=65,
        ),
        FigureVerdict(
            output='box "x"',
            figure="samples within tolerance",
            successes=3.0,
            samples=3,
            share=1.0,
            share_ci95=(0.44, 1.0),
            minimum=0.97,
            state=UNDECIDED,
            samples_needed=None,
            changed_at_samples=0,
        ),
    ]
    return ShadowResult(
        rate=0.1,
        on_failing="fallback",
        reference="/m/saved_model",
        confidence=0.95,
        state=FAILING,
        compared_samples=163,
        dropped_samples=7,
        native_failed_requests=1,
        figures=figures,
        unjudged=[],
        fallback=True,
        fallback_at_samples=65,
        capture="/c/digits.npz",
        captured_samples=31,
        capture_dropped_samples=0,
        queued_requests=2,
    )


def parsed(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


def types(text: str) -> list[tuple[str, str]]:
    """(family, type) of each family, as Prometheus' parser reads them."""
    from prometheus_client.parser import text_string_to_metric_families

    return [(family.name, family.type) for family in text_string_to_metric_families(text)]


def value(found: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    [(_, number)] = [(got, v) for got, v in found[name] if got == labels]
    return number


def test_the_live_verdict_reads_back_through_prometheus_parser() -> None:
    found = parsed(render(result()))
    figure = {"output": "probabilities", "figure": "top-1 agreement"}
    assert value(found, "trtconv_shadow_share", **figure) == 0.8125
    assert value(found, "trtconv_shadow_share_lower", **figure) == 0.745
    assert value(found, "trtconv_shadow_share_upper", **figure) == 0.865
    assert value(found, "trtconv_shadow_minimum", **figure) == 0.97
    assert value(found, "trtconv_shadow_samples_total", **figure) == 160
    assert value(found, "trtconv_shadow_agreeing_samples_total", **figure) == 130  # counters
    kinds = dict(types(render(result())))  # the parser names a counter without `_total`
    assert kinds["trtconv_shadow_samples"] == kinds["trtconv_shadow_agreeing_samples"] == "counter"
    assert kinds["trtconv_shadow_samples_floor"] == "gauge"
    assert value(found, "trtconv_shadow_state", **figure, state="failing") == 1
    assert value(found, "trtconv_shadow_state", **figure, state="holding") == 0
    assert value(found, "trtconv_shadow_verdict", state="failing") == 1
    assert value(found, "trtconv_shadow_compared_samples_total") == 163
    assert value(found, "trtconv_shadow_dropped_samples_total") == 7
    assert value(found, "trtconv_shadow_fallback") == 1
    assert value(found, "trtconv_shadow_captured_samples") == 31
    quoted = {"output": 'box "x"', "figure": "samples within tolerance"}  # escaped, read back
    assert math.isnan(value(found, "trtconv_shadow_samples_needed", **quoted))


@pytest.fixture
def triton_page() -> Iterator[str]:
    """A page standing in for Triton's metrics endpoint: its URL."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = TRITON_PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_the_page_serves_tritons_metrics_then_the_checks(triton_page: str) -> None:
    from tests.helpers.ports import free_ports

    [port] = free_ports(1)
    page = MetricsPage("127.0.0.1", port, triton_page, result)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            found = parsed(answer.read().decode())
    finally:
        page.close()
    # the parser names a counter's samples NAME_total
    assert value(found, "nv_inference_count_total", model="digits", version="1") == 412
    assert value(found, "trtconv_shadow_verdict", state="failing") == 1
