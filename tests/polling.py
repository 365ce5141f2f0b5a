"""Waiting for something another thread or process does: the one polling loop of the test suite."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(read: Callable[[], T], until: Callable[[T], bool], *, timeout: float, interval: float = 0.05) -> T:
    """Call ``read`` every ``interval`` seconds until ``until(value)`` holds or ``timeout`` seconds pass.

    Returns the last value read, so the caller's assertion shows what was there when time ran out
    (``assert poll(count, lambda n: n >= 7, timeout=20) == 7``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if until(value) or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
