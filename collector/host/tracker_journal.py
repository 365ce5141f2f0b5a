"""The tracker's side of the crash journal (:mod:`.journal`): open this process's at start, and report what the
journals of dead processes on the host left behind (:mod:`.journal_recovery`).

A dead process's requests in flight are queued for export as ``error`` rows (``stats()['requests_recovered']``);
the finished requests whose rows it had not exported yet are counted (``stats()['requests_lost']``); one log
line per dead process says both. Its journal stays (held by this process) until the exporter delivered those rows: a
row it did not deliver (refused, dropped, still held when it stopped) is counted (``stats()['recovered_undelivered']``)
and left in the journal for the next tracker (:class:`~.journal_recovery.DeadJournal`). A row the destination refused
for good (not encodable or writable, a 400) is done with: cleared, counted (``stats()['recovered_rejected']``) and
logged once with the reason. A journal read :data:`~.journal_recovery.MAX_RECOVERIES` times already, or whose process
died more than :data:`~.journal_recovery.GIVE_UP_AFTER_S` ago, is given up: removed, its rows counted
(``stats()['recovered_given_up']``) and logged once, with what to do.

The journals are let go only once the exporter settled every row it could: it stopped, and a post still under way when
its shutdown returned (``exporter.delivering``) settles its rows when the service answers, so a row delivered then is
cleared too, never exported twice.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import struct
from typing import TYPE_CHECKING, Final

from inferensics.collector.host import torch_adapter
from inferensics.collector.host.delivery import NOT_DELIVERED
from inferensics.collector.host.journal import DELIVERIES, JOURNAL_DIR_ENV, Journal, journal_dir
from inferensics.schema import columns as col

if TYPE_CHECKING:
    from inferensics.collector.host.delivery import Outcome
    from inferensics.collector.host.journal_recovery import DeadJournal, Recovered
    from inferensics.collector.host.request_tracker import Tracker

log = logging.getLogger("inferensics.collector.host")

JOURNAL: Final = "crash_journal"
"""The capability name of the crash journal (:mod:`inferensics.collector.host.journal`)."""
UNDELIVERED: Final = "recovered_undelivered"
"""``stats()`` key: rows recovered from dead processes' journals that this process did not deliver (refused, dropped,
or still unsent when it stopped); they stay in the journal for the next tracker."""
REJECTED: Final = "recovered_rejected"
"""``stats()`` key: recovered rows the destination refused for good (not encodable or writable, a 400): cleared from
their journal, never exported again."""
GIVEN_UP: Final = "recovered_given_up"
"""``stats()`` key: rows of dead processes' journals given up undelivered (too many recoveries, or too old)."""


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
    watch = getattr(exporter, "delivery_watch", None)
    for dead in recover_dead(directory, destination):
        tracker.counters_local["dead_processes"] += 1
        if dead.given_up:
            tracker.counters_local[GIVEN_UP] += len(dead.given_up)
            log.warning("inferensics: %s", given_up_line(dead, destination))
        claim = dead.journal
        for row, slot in zip(dead.rows, dead.slots, strict=True):
            if claim is not None and watch is not None:
                watch.watch(row, functools.partial(_settled, tracker, claim, slot))
            if tracker.queue.put("recovered", row):
                queued += 1
            elif claim is not None and watch is not None:  # a full queue: not delivered, left for the next tracker
                for settled in watch.take([row]):
                    settled(NOT_DELIVERED)
        if claim is not None:
            if watch is None:  # its delivery cannot be told: gone, as the rows are queued
                claim.discard()
            elif claim.held:
                tracker.dead_journals.append(claim)
        if dead.lost:
            tracker.counters_local[col.REQUESTS_LOST] += dead.lost
        if dead.rows or dead.lost:
            log.warning("inferensics: %s", death_line(dead))
    if queued and watch is None and tracker.journal is not None:  # counted apart in its journal: see _settled
        tracker.journal.note_recovered(queued)


def _settled(tracker: Tracker, claim: DeadJournal, slot: int, outcome: Outcome) -> None:
    """A recovered row's delivery settled (the exporter's thread): the dead journal clears its slot (delivered, or
    refused for good) or keeps it; this process's journal counts a delivered one apart from its own rows (delivered
    with them: what its death lost reads right)."""
    claim.settled(slot, outcome)
    if outcome.refused:
        tracker.counters_local[REJECTED] += 1
        if tracker.counters_local[REJECTED] == 1:
            log.error("inferensics: a request row recovered from a dead process's crash journal was refused for good "
                      "by %s (%s): dropped from the journal, never exported again; counted in stats() as "
                      "recovered_rejected", getattr(tracker.exporter, "destination", "the exporter"),
                      outcome.refused[:300])  # fmt: skip
        return
    if not outcome.delivered:
        tracker.counters_local[UNDELIVERED] += 1
        return
    journal = tracker.journal
    if journal is not None:
        with contextlib.suppress(ValueError, TypeError, struct.error):  # closed at a shutdown meanwhile
            journal.note_recovered(1)


def release_dead_journals(tracker: Tracker) -> None:
    """The tracker stopped (its exporter too): the dead journals whose rows were not all delivered stay, with the rows
    still undelivered, for the next tracker; those rows are counted (``recovered_undelivered``). An exporter whose
    thread is still posting (``delivering``) settles every row it has when it ends: each journal goes, or is let go,
    with its last row then (letting go now would leave a row it delivers afterwards in the journal, exported twice)."""
    claims, tracker.dead_journals = tracker.dead_journals, []
    if getattr(tracker.exporter, "delivering", False):
        return
    for claim in claims:
        tracker.counters_local[UNDELIVERED] += claim.release()


def given_up_line(dead: Recovered, destination: str) -> str:
    """One line on a dead process's rows given up undelivered: how many, why, and what to do."""
    ids = ", ".join(dead.given_up[:5]) + (" ..." if len(dead.given_up) > 5 else "")
    who = dead.process or "a serving process"
    return (
        f"{len(dead.given_up)} request row(s) recovered from the crash journal of {who} ({ids}) are given up "
        f"undelivered ({dead.why_given_up}): its journal is removed, the rows counted in stats() as "
        f"recovered_given_up. Check that {destination or 'the exporter'} takes exports (stats() export_refused_*, "
        "last_error) before restarts."
    )


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
