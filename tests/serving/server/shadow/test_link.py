"""Served samples reach the shadow check over a real socket; full queues drop and count what
they drop, so every sample offered is either taken or counted; the fallback reaches every
instance, and a client without the key is refused."""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Client

import numpy as np
import pytest

from trtconv.serving.server.shadow.link import Inbox, ShadowTap, new_address


def request(rows: int = 1) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    return {"x": np.ones((rows, 3), np.float32)}, {"y": np.zeros((rows, 2), np.float32)}


def settle(inbox: Inbox, expected: int, timeout_s: float = 10.0) -> None:
    """Until the inbox has seen `expected` samples (queued or dropped)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queued = sum(offered.samples for offered in list(inbox.waiting.queue))
        if queued + inbox.dropped >= expected:
            return
        time.sleep(0.01)


def test_every_sample_offered_is_taken_or_counted_as_dropped() -> None:
    address, key = new_address(), os.urandom(16)
    inbox = Inbox(address, key, capacity=3)  # nobody takes until the end: it fills up
    tap = ShadowTap(1.0, address, key, capacity=2)
    try:
        offered = 0
        for rows in [1, 2, 3] * 40:
            tap.offer(*request(rows))
            offered += rows
        time.sleep(0.2)
        tap.offer(*request(1))  # the last one carries its instance's count of drops
        offered += 1
        settle(inbox, offered)
        taken = inbox.take(10_000, 1.0)
        assert 0 < len(taken) <= 3
        assert sum(o.samples for o in taken) + inbox.dropped == offered
        assert inbox.dropped >= offered - 3 * 3  # at most 3 requests of 3 samples were kept
    finally:
        tap.close()
        inbox.close()


def last_arrived(inbox: Inbox) -> int:
    """The samples of the request the inbox took last (0: none yet)."""
    arrived = inbox.waiting.queue
    return arrived[-1].samples if arrived else 0


def test_a_tap_offers_about_its_share_of_requests() -> None:
    address, key = new_address(), os.urandom(16)
    inbox = Inbox(address, key, capacity=100_000)
    tap = ShadowTap(0.1, address, key, capacity=100_000)
    try:
        for _ in range(10_000):
            tap.offer(*request())
        # A marker of two samples, drawn for sure: one connection keeps the order, so once it
        # has arrived every drawn request before it has too.
        tap.rate = 1.0
        tap.offer(*request(rows=2))
        deadline = time.monotonic() + 30
        while last_arrived(inbox) != 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert last_arrived(inbox) == 2 and inbox.dropped == 0
        drawn = inbox.waiting.qsize() - 1
        assert 800 <= drawn <= 1200  # binomial(10000, 0.1): 1000 +- 30; outside 6.6 sigma
    finally:
        tap.close()
        inbox.close()


def test_the_fallback_reaches_instances_connected_before_and_after_it() -> None:
    address, key = new_address(), os.urandom(16)
    inbox = Inbox(address, key)
    before = ShadowTap(1.0, address, key)
    try:
        time.sleep(0.2)  # accepted
        inbox.tell_fallback()
        after = ShadowTap(1.0, address, key)
        deadline = time.monotonic() + 5
        while not (before.fallback and after.fallback) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert before.fallback and after.fallback
        after.close()
    finally:
        before.close()
        inbox.close()


def test_a_client_without_the_key_is_refused_and_the_inbox_keeps_serving() -> None:
    from multiprocessing import AuthenticationError

    address, key = new_address(), os.urandom(16)
    inbox = Inbox(address, key)
    try:
        with pytest.raises(AuthenticationError):
            Client(address, family="AF_UNIX", authkey=b"wrong")
        tap = ShadowTap(1.0, address, key)
        tap.offer(*request())
        assert [o.samples for o in inbox.take(10, 5.0)] == [1]
        tap.close()
    finally:
        inbox.close()
