"""The tracker's side of the crash journal (:mod:`.journal`): open this process's at start, and report what the
journals of dead processes on the host left behind (:mod:`.journal_recovery`).

A dead process's requests in flight are queued for export as ``error`` rows (``stats()['requests_recovered']``);
the finished requests whose rows it had not exported yet are counted (``stats()['requests_lost']``); one log
line per dead process says both.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from inferensics.collector.host import torch_adapter
from inferensics.collector.host.journal import DELIVERIES, JOURNAL_DIR_ENV, Journal, journal_dir
from inferensics.schema import columns as col

if TYPE_CHECKING:
    from inferensics.collector.host.journal_recovery import Recovered
    from inferensics.collector.host.request_tracker import Tracker

log = logging.getLogger("inferensics.collector.host")

JOURNAL: Final = "crash_journal"
"""The capability name of the crash journal (:mod:`inferensics.collector.host.journal`)."""


def open_journal(tracker: Tracker, traffic_class: str) -> None:
    """Start ``tracker``'s crash journal (``tracker.journal``; its capability says why not), then queue and count
    what dead processes' journals for the same destination left."""
    directory = journal_dir(tracker.config.journal_dir)
    if directory is None:
        tracker.capabilities[JOURNAL] = torch_adapter.Capability(JOURNAL, False, "off (SdkConfig.journal_dir)")
        return
    exporter = tracker.exporter
    destination = str(getattr(exporter, "destination", ""))
    # An exporter that reports the request rows it delivered (on_requests_delivered) has them counted in the
    # journal: a death then tells how many finished requests it lost.
    deliveries = hasattr(exporter, "on_requests_delivered")
    header = {"process": tracker.process, "host": tracker.host, "hw_pool": tracker.hw_pool, "model": tracker.model,
              "bundle_id": tracker.bundle_id, "traffic_class": traffic_class, "destination": destination,
              DELIVERIES: deliveries}  # fmt: skip
    try:
        tracker.journal = Journal(directory, header)
    except OSError as exc:
        tracker.capabilities[JOURNAL] = torch_adapter.Capability(JOURNAL, False, f"{directory}: {exc}")
        log.warning("inferensics: no crash journal in %s (%s); set $%s to a writable folder", directory, exc,
                    JOURNAL_DIR_ENV)  # fmt: skip
    else:
        tracker.capabilities[JOURNAL] = torch_adapter.Capability(JOURNAL, True)
        tracker.pipeline.journal = tracker.journal
        if deliveries:
            exporter.on_requests_delivered = tracker.journal.delivered  # type: ignore[attr-defined]
    from inferensics.collector.host.journal_recovery import recover_dead

    queued = 0
    for dead in recover_dead(directory, destination):
        tracker.counters_local["dead_processes"] += 1
        queued += sum(tracker.queue.put("recovered", row) for row in dead.rows)
        if dead.lost:
            tracker.counters_local[col.REQUESTS_LOST] += dead.lost
        if dead.rows or dead.lost:
            log.warning("inferensics: %s", death_line(dead))
    if queued and tracker.journal is not None:  # delivered with this process's own rows: counted apart in its journal
        tracker.journal.note_recovered(queued)


def death_line(dead: Recovered) -> str:
    """One line on a dead process: its requests in flight, exported as error rows, and the finished requests it
    had not exported, lost."""
    said = []
    if dead.rows:
        ids = ", ".join(r.request_id for r in dead.rows[:5]) + (" ..." if len(dead.rows) > 5 else "")
        said.append(f"{len(dead.rows)} request(s) in flight: {ids}; exported as error rows")
    if dead.lost:
        said.append(
            f"{dead.lost} finished request(s) whose rows it had not exported yet (queued, buffered or held for export, "
            "or dropped): lost, counted in stats() as requests_lost"
        )
    return f"{dead.process or 'a serving process'} died ({dead.died}) with " + "; and ".join(said)
