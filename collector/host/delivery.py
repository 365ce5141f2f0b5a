"""Rows whose delivery someone waits on: the exporter says of each, once, whether it reached its destination.

A dead process's recovered rows (:mod:`.journal_recovery`) are watched: their crash journal is removed only once
every row was delivered, so a row whose export failed (the service down, a refusal, a full queue) or a process that
dies again before the export leaves the journal for the next tracker, which recovers what is left. Only watched rows
cost anything: an exporter looks a row up only while something is watched.

A row the destination refuses for good (:func:`~.export_health.refused_for_good`: a record that cannot be encoded or
written, a service's 400) is settled as done, with the reason: exported again it would be refused again, on every
restart. A refusal that may pass later (the service down, shedding load, refusing the token) leaves it for a later try.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

log = logging.getLogger("inferensics.collector.host")


class Outcome(NamedTuple):
    """How a watched row's delivery ended."""

    delivered: bool
    refused: str = ""
    """Not delivered: why the destination refused it for good (never taken on a later try either); ``""``: it may
    be on a later try (the service down, back-pressure, auth, a full queue, still held when the exporter stopped)."""


DELIVERED: Final = Outcome(True)
NOT_DELIVERED: Final = Outcome(False)
"""Not delivered this time: may be on a later try."""

Settled = Callable[[Outcome], None]
"""Called once per watched row with its :class:`Outcome`."""


class DeliveryWatch:
    """The watched rows of one exporter (its ``delivery_watch``), by identity; thread-safe."""

    def __init__(self) -> None:
        self._rows: dict[int, tuple[object, Settled]] = {}
        self._lock = threading.Lock()

    def watch(self, row: object, settled: Settled) -> None:
        """Call ``settled`` once ``row`` was delivered, or not (its :class:`Outcome`)."""
        with self._lock:
            self._rows[id(row)] = (row, settled)

    def take(self, rows: Iterable[object]) -> list[Settled]:
        """The watchers of those of ``rows`` that are watched, no longer watched (the caller settles them)."""
        if not self._rows:
            return []
        out: list[Settled] = []
        with self._lock:
            for row in rows:
                entry = self._rows.get(id(row))
                if entry is not None and entry[0] is row:
                    del self._rows[id(row)]
                    out.append(entry[1])
        return out

    def take_all(self) -> list[Settled]:
        """Every watcher, no longer watched (an exporter that stopped settles what it never delivered)."""
        with self._lock:
            out = [settled for _, settled in self._rows.values()]
            self._rows.clear()
        return out

    def __len__(self) -> int:
        return len(self._rows)


def settle(watchers: Iterable[Settled], outcome: Outcome) -> None:
    """Tell each watcher; one that raises is logged and never stops the export."""
    for settled in watchers:
        try:
            settled(outcome)
        except Exception as exc:
            log.warning("inferensics: a delivery watcher failed (%s: %s)", type(exc).__name__, exc)
