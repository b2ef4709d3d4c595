"""The metrics page of a server with a shadow check: Triton's own metrics, then the check's, in
Prometheus' text format, at the one URL the serving line announces.

Triton's metrics come from its own endpoint (on loopback, a port of its own) at each scrape; the
check's are rendered from its result at that moment. Every family is named `trtconv_shadow_*`;
figures carry `output` and `figure` labels, and a state is one series per possible state, 1 on
the current one (Prometheus' way of exposing an enum). docs/serving.md lists them.

A figure's counts are counters (`samples_total`, `agreeing_samples_total`): summed over the
replicas of a fleet they are the counts one server given all their traffic would have, so the
fleet's share and Wilson interval follow from the sums (docs/serving.md has the recording rules).
"""

from __future__ import annotations

import math
import threading
import urllib.request
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trtconv.serving.server.shadow.check import ShadowResult
from trtconv.serving.server.shadow.verdict import STATES, FigureVerdict

PREFIX = "trtconv_shadow_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TRITON_TIMEOUT_S = 2.0

Series = tuple[dict[str, str], float]


def family(name: str, kind: str, words: str, series: Iterable[Series]) -> list[str]:
    """One metric family in the text format: its HELP and TYPE lines, then its series."""
    lines = [f"# HELP {PREFIX}{name} {words}", f"# TYPE {PREFIX}{name} {kind}"]
    for labels, value in series:
        inside = ",".join(f'{key}="{_escaped(text)}"' for key, text in labels.items())
        lines.append(f"{PREFIX}{name}{'{' + inside + '}' if inside else ''} {_number(value)}")
    return lines


def render(result: ShadowResult) -> str:
    """The check's families (see docs/serving.md)."""
    figures = result.figures
    states = [({"state": state}, float(result.state == state)) for state in STATES]
    lines = [
        *family(
            "sampling_rate", "gauge", "Share of served requests shadowed.", [({}, result.rate)]
        ),
        *family(
            "compared_samples_total",
            "counter",
            "Samples run by the native model and compared.",
            [({}, result.compared_samples)],
        ),
        *family(
            "dropped_samples_total",
            "counter",
            "Samples drawn but dropped: the shadow queues were full.",
            [({}, result.dropped_samples)],
        ),
        *family(
            "native_failed_requests_total",
            "counter",
            "Shadowed requests the native model failed on (not compared).",
            [({}, result.native_failed_requests)],
        ),
        *family(
            "queued_requests",
            "gauge",
            "Requests waiting for the check.",
            [({}, result.queued_requests)],
        ),
        *family("verdict", "gauge", "The live verdict (1 on its state).", states),
        *_figure_families(figures),
        *family(
            "fallback",
            "gauge",
            "1 once the native model serves (--on-failing fallback).",
            [({}, float(result.fallback))],
        ),
        *family(
            "captured_samples",
            "gauge",
            "Disagreeing samples kept in the capture file.",
            [({}, result.captured_samples)],
        ),
        *family(
            "capture_dropped_samples_total",
            "counter",
            "Disagreeing samples not kept, or dropped for newer ones.",
            [({}, result.capture_dropped_samples)],
        ),
    ]
    return "\n".join(lines) + "\n"


def _figure_families(figures: list[FigureVerdict]) -> list[str]:
    def each(value: Callable[[FigureVerdict], float | None]) -> list[Series]:
        return [(_labels(f), _or_nan(value(f))) for f in figures]

    low = each(lambda f: f.share_ci95[0] if f.share_ci95 else None)
    high = each(lambda f: f.share_ci95[1] if f.share_ci95 else None)
    states = [
        ({**_labels(f), "state": state}, float(f.state == state))
        for f in figures
        for state in STATES
    ]
    return [
        *family(
            "samples_total",
            "counter",
            "Samples a figure was counted on.",
            each(lambda f: f.samples),
        ),
        *family(
            "agreeing_samples_total",
            "counter",
            "Samples that agreed or lay within tolerance (a class map's shares summed).",
            each(lambda f: f.successes),
        ),
        *family(
            "samples_floor",
            "gauge",
            "Samples a figure counts before its interval decides it (the fewest that could "
            "show its bound).",
            each(lambda f: f.samples_floor),
        ),
        *family("share", "gauge", "The running share.", each(lambda f: f.share)),
        *family("share_lower", "gauge", "Lower end of the share's 95% interval.", low),
        *family("share_upper", "gauge", "Upper end of the share's 95% interval.", high),
        *family(
            "minimum",
            "gauge",
            "The bound the share is judged against (1: every sample within atol).",
            each(lambda f: 1.0 if f.minimum is None else f.minimum),
        ),
        *family(
            "samples_needed",
            "gauge",
            "About how many more samples would decide an undecided figure (NaN: none would).",
            each(lambda f: f.samples_needed),
        ),
        *family("state", "gauge", "A figure's live verdict (1 on its state).", states),
    ]


def _labels(figure: FigureVerdict) -> dict[str, str]:
    return {"output": figure.output, "figure": figure.figure}


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def triton_metrics(url: str) -> str:
    """Triton's metrics page, or a comment saying why it could not be read."""
    try:
        with urllib.request.urlopen(url, timeout=TRITON_TIMEOUT_S) as response:
            text: str = response.read().decode()
    except OSError as exc:
        return f"# Triton's metrics at {url} could not be read: {exc}\n"
    return text if text.endswith("\n") else text + "\n"


class MetricsPage:
    """Serves GET /metrics on `host:port` from a thread: Triton's page (`triton_url`), then the
    check's (`result` at that moment)."""

    def __init__(
        self, host: str, port: int, triton_url: str, result: Callable[[], ShadowResult]
    ) -> None:
        class Page(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404, "the metrics are at /metrics")
                    return
                body = (triton_metrics(triton_url) + render(result())).encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # a scrape every few seconds is not news

        self.server = ThreadingHTTPServer((host, port), Page)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, daemon=True, name="trtconv-shadow-metrics"
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
