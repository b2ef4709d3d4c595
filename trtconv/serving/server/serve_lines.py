"""What `serve` says on stderr: the serving line (where it listens), the exposure warning, the
admission line, the shadow check's line, and what a signal's stop says."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trtconv.core.numbers import human
from trtconv.options.serve import OnFailing, ServeOptions
from trtconv.options.serving import LOOPBACK
from trtconv.serving.repository.admission import Admission
from trtconv.serving.server.serve_plan import Plan
from trtconv.serving.server.serve_result import ServeResult


def exposure_warning(host: str, api_key_file: Path | None) -> str | None:
    """The one-line warning for a server others can reach with inference open to them."""
    if host in (LOOPBACK, "localhost", "::1") or api_key_file is not None:
        return None
    return (
        f"warning: inference on {host} is open to anyone who reaches it: give --api-key-file "
        "to require a key (Triton's restricted API; clients send it in the "
        "triton-access-token header)"
    )


def announce_serving(
    announce: Callable[[str], None],
    name: str,
    options: ServeOptions,
    where: tuple[int, int, str],
    decided: Plan,
    served_ms: float,
) -> None:
    """The "serving" line first (whoever waits for it reads no further), then the exposure
    warning when there is one, then the admission line."""
    http, grpc, metrics_url = where
    host = options.host
    page = " (Triton's and the shadow check's)" if options.shadow is not None else ""
    announce(
        f"serving {name} at http://{host}:{http} (gRPC {host}:{grpc}; metrics {metrics_url}{page})"
    )
    warning = exposure_warning(host, options.api_key_file)
    if warning:
        announce(warning)
    if decided.batched:
        announce(admission_line(decided, served_ms))


def admission_line(decided: Plan, served_ms: float) -> str:
    """The announced line: the batch limit, the warm-up and the queue policy, and where they
    came from."""
    policy, warm, largest = decided.policy, decided.warm, decided.max_batch
    native = decided.native_warm
    fallback = (
        f" (native model: batch 1 {human(native[0])} ms, batch {largest} {human(native[1])} ms)"
        if native
        else ""
    )
    return (
        f"{decided.instances} instance(s){decided.instances_why}; batches up to {largest}"
        f"{decided.cap_why}; warm-up: batch 1 {human(warm[0])} ms, batch {largest} "
        f"{human(warm[1])} ms{fallback}, one request served {human(served_ms)} ms; "
        f"{admission_words(policy)}"
    )


def admission_words(policy: Admission) -> str:
    """What the queue policy does to a request, and where its figures came from."""
    if not policy.enabled:
        # What a user who never read the admission docs meets: said where they look.
        return (
            f"admission: off ({policy.source}): an overload is queued whole, none refused, "
            "and every request waits longer the longer it lasts (at twice the capacity the "
            "p99 grows by seconds); --admission holds the wait within --latency-budget-ms by "
            "answering the excess UNAVAILABLE at once"
        )
    size = f"up to {policy.max_queue_size} requests" if policy.max_queue_size else "unbounded"
    wait = (
        f"each answered UNAVAILABLE (HTTP 503) if still queued after {human(policy.timeout_ms)} ms"
        if policy.timeout_us
        else "no queue timeout"
    )
    return f"admission: queue {size}, {wait} ({policy.source})"


def shadow_line(options: ServeOptions, reference: Path, capture: Path | None) -> str:
    """The shadow check's line: the share shadowed, against what, what a failing verdict does
    and where disagreeing samples are kept."""
    rate = options.shadow or 0.0
    action = (
        "the native model serves instead once it is failing"
        if options.on_failing == OnFailing.FALLBACK
        else "a failing verdict is said and the artifact keeps serving (--on-failing fallback "
        "to serve the native model instead)"
    )
    kept = f"; disagreeing samples kept in {capture}" if capture is not None else ""
    share = "every request" if rate >= 1 else f"{rate:.4g} of requests (one in {1 / rate:.3g})"
    return (
        f"shadow: {share} run again by the native model {reference} off the served path and "
        f"judged as the artifact was validated; {action}{kept}"
    )


def stop_message(stopped_by: str, result: ServeResult) -> str:
    """What a signal's stop says: what was run, failed and timed out (and the live verdict)."""
    what = "terminated (SIGTERM)" if stopped_by == "SIGTERM" else "interrupted"
    shadow = f"; shadow check: {result.shadow.state}" if result.shadow is not None else ""
    return (
        f"{what}: stopped after answering the requests in flight; {result.requests} run "
        f"({result.failed_requests} failed), {result.timed_out_requests} timed out in the "
        f"queue{shadow}"
    )
