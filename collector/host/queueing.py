"""A bounded, never-blocking hand-off from the serving threads to the SDK's background thread."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any


class BoundedQueue:
    """``put`` never blocks and never raises: past ``capacity`` items it drops and counts the drop.

    ``deque.append``/``popleft`` are atomic under the GIL, so no lock is taken on the serving path; the
    capacity check may overshoot by a few items under contention, which is harmless. ``items`` is public
    for the request scope's exit, which does what ``put`` does without the call.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: deque[tuple[str, Any]] = deque()
        self.dropped: Counter[str] = Counter()
        self.accepted = 0

    def put(self, kind: str, item: Any) -> bool:
        """Enqueue ``item``; ``False`` (and a counted drop) when full."""
        if len(self.items) >= self.capacity:
            self.dropped[kind] += 1
            return False
        self.items.append((kind, item))
        self.accepted += 1
        return True

    def drain(self, limit: int = 10_000) -> list[tuple[str, Any]]:
        """Take up to ``limit`` items, oldest first."""
        out: list[tuple[str, Any]] = []
        pop = self.items.popleft
        try:
            for _ in range(limit):
                out.append(pop())
        except IndexError:
            pass
        return out

    def __len__(self) -> int:
        return len(self.items)
