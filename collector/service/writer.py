"""The store writer: one thread that moves sealed spool segments into the store, oldest first.

The engine decodes a segment's OTLP requests (``engine_decoder.py``); each table is inserted with the token
``<segment>:<table>`` and the segment is deleted from the spool only when all its tables are in. Rows
rejected by validation are counted by reason and logged in one warning per segment, each reason with its rows. When
an insert fails the segment stays, the writer marks the store unavailable (``/readyz`` answers 503) and
retries with backoff; ingest keeps acknowledging into the spool until its cap. Only a refusal of the
data itself (``refusals.py``), repeated while the store answers, moves a segment to quarantine; quarantined
segments are re-driven automatically (after a store outage ends, and on a growing interval otherwise), so
one whose refusal passed is written without a person moving files.

With nothing to write the writer probes the store (``SELECT 1`` every :data:`PROBE_EVERY_S`, on its own thread and
connection), so ``store_up`` and ``/readyz`` follow an outage that begins or ends while no span arrives. chDB's
session can hand the statement after a failed one what the failed one left (its header and blocks, no error: a
``command`` returns them as its result, a ``query`` fails on them); the probe and the check after a refused insert
ask twice, as the schema migrator does after a failed migration, so leftovers are never read as the store's answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from inferensics.collector.service.engine_decoder import EngineDecoder
from inferensics.collector.service.metrics import Metrics
from inferensics.collector.service.refusals import is_content_refusal
from inferensics.collector.service.spool import Segment, Spool, read_segment
from inferensics.schema.store import Store, StoreError, StoreNewerError, error_line

log = logging.getLogger("inferensics.collector.service")


QUARANTINE_AFTER: Final = 5
"""Content refusals of one segment while the store answers after which it is quarantined."""
REDRIVE_FIRST_S: Final = 30.0
"""Seconds after a quarantine before its segment is first tried again; the interval doubles per refusal."""
REDRIVE_MAX_S: Final = 3600.0
"""The longest wait between two tries of a quarantined segment."""
PROBE_EVERY_S: Final = 5.0
"""Seconds between two probes of the store while the writer has nothing to write (a scrape interval or less)."""


@dataclass
class Faults:
    """Test-only fault injection: while ``store_down`` is set every insert fails before reaching the engine.

    The embedded engine cannot be stopped like a server, so the fault tests make the writer's insert
    call fail instead; everything around it (retry, spool growth, cap, replay) runs as in production.
    :meth:`cancel_inserts` cancels the writer's real queries with the engine's own ``KILL QUERY``.
    """

    store_down: bool = False
    killed: int = 0

    def cancel_inserts(
        self, open_store: Callable[[], Store], count: int, failures: Callable[[], float], timeout_s: float = 60.0
    ) -> None:
        """Start a thread that ``KILL QUERY``s the writer's decode and insert queries, from a client of its own
        (what an operator's KILL does), until ``failures()`` (the writer's failed inserts) rose by ``count``
        or ``timeout_s`` passed. A KILL that reaches a query as it finishes cancels nothing, so the killer
        goes on until the writer has seen ``count`` cancelled queries."""
        start = failures()

        def killer() -> None:
            store = open_store()
            deadline = time.monotonic() + timeout_s
            try:
                while failures() - start < count and time.monotonic() < deadline:
                    rows = store.client.query(
                        "KILL QUERY WHERE (query ILIKE 'INSERT INTO%' OR query ILIKE 'CREATE OR REPLACE TABLE%') "
                        "AND query NOT ILIKE '%KILL QUERY%' SYNC"
                    ).result_rows
                    self.killed += len(rows)
                    time.sleep(0.001)
            finally:
                store.close()

        threading.Thread(target=killer, name="inferensics-fault-killer", daemon=True).start()


class StoreWriter(threading.Thread):
    """Drains the spool into the store; owns the store connection."""

    def __init__(
        self,
        spool: Spool,
        open_store: Callable[[], Store],
        metrics: Metrics,
        faults: Faults,
        *,
        decoder: EngineDecoder,
        max_backoff_s: float = 2.0,
        quarantine_after: int = QUARANTINE_AFTER,
        redrive_first_s: float = REDRIVE_FIRST_S,
        probe_every_s: float = PROBE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name="inferensics-store-writer", daemon=True)
        self.spool = spool
        self._open_store = open_store
        self.metrics = metrics
        self.faults = faults
        self.max_backoff_s = max_backoff_s
        self.quarantine_after = quarantine_after
        self.decoder = decoder
        self.redrive_first_s = redrive_first_s
        self._clock = clock
        self._redrive_wait = redrive_first_s
        self._redrive_at = clock() + redrive_first_s
        self.probe_every_s = probe_every_s
        self._probed_at = clock()
        self.store: Store | None = None
        self.store_ok = False
        self.last_error = ""
        self.store_newer = False  # the store's schema is a later release's: this one must not write to it
        self._halt = threading.Event()
        self.store_lock = threading.Lock()
        self._connect_lock = threading.Lock()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to finish its current segment and exit (a writer never started has nothing to finish)."""
        self._halt.set()
        if self.ident is not None:
            self.join(timeout)

    def connect(self, *, quiet: bool = False) -> Store | None:
        """Open and migrate the store once; on failure remember why and return ``None``.

        Thread-safe: the query API calls it too (a store that was down at start-up is migrated by
        whichever comes first, the first batch or the first query, and by nobody twice). ``quiet`` leaves the
        failure unlogged (start-up decides first whether it waits for the store or refuses to start).
        """
        with self._connect_lock:
            if self.store is None:
                try:
                    store = self._open_store()
                    store.migrate()
                except Exception as exc:  # StoreError, or the driver's own while migrating
                    self.store_newer = isinstance(exc, StoreNewerError)
                    self.metrics.inc("store_errors")
                    self._failed(
                        str(exc) if isinstance(exc, StoreError) else f"cannot migrate the store: {error_line(exc)}",
                        quiet=quiet,
                    )
                    return None
                self.store = store
                self.store_ok = True
            return self.store

    def run(self) -> None:
        """Loop until stopped: seal segments that are due, insert the oldest sealed one."""
        backoff = 0.05
        while not self._halt.is_set():
            self.spool.seal_if_due()
            seg = self.spool.next_sealed(timeout=0.05)
            if seg is None:
                self._probe_due()
                self._redrive_due()
                continue
            if self._write(seg):
                backoff = 0.05
            else:
                seg.attempts += 1
                self._halt.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)

    def _write(self, seg: Segment) -> bool:
        store = self.connect()
        if store is None:
            return False
        payloads, skipped = read_segment(seg.path)
        if skipped:
            self.metrics.inc("spool_damaged_bytes", skipped)
            log.warning("spool segment %s: skipped %d bytes of damaged (never acknowledged) records; "
                        "replaying the rest", seg.name, skipped)  # fmt: skip
        possibly_seen = seg.recovered or seg.attempts > 0
        started = time.perf_counter()
        try:
            self._check_faults()
            with self.store_lock:
                result = self.decoder.insert(
                    store, seg.name, payloads, possibly_seen=possibly_seen, before_insert=self._check_faults
                )
        except Exception as exc:  # the engine raises several types; all mean "retry from the spool"
            self.metrics.inc("store_errors")
            reason = error_line(exc)
            self._failed(f"insert of spool segment {seg.name} failed: {reason}")
            if is_content_refusal(exc):
                self._refused_while_up(store, seg, reason)
            else:
                seg.refused = 0  # an outage (disk, permissions, cancelled, memory, parts): wait for the store
            return False
        self.metrics.observe_batch(time.perf_counter() - started)
        # Every row the engine decoded: sent (written or a duplicate) and every row it rejected (invalid, time out
        # of range, unknown table), as the metric's help says.
        self.metrics.inc("decoded_rows", result.sent + result.rejected.total())
        self.metrics.inc("written_rows", result.landed)
        self.metrics.inc("deduplicated_rows", result.sent - result.landed)
        for stage, seconds in result.seconds.items():
            self.metrics.inc("writer_seconds", seconds, label=stage)
        if result.duplicate_spans:
            self.metrics.inc("duplicate_spans", result.duplicate_spans)
        for reason, n in result.rejected.items():
            self.metrics.inc("rejected", n, label=reason)
        for reason, n in result.dropped.items():
            if n:
                self.metrics.inc("dropped", n, label=reason)
        if result.messages:
            counts = f"rejected {dict(result.rejected)}; " if result.rejected else ""
            log.warning("spool segment %s: %s%s", seg.name, counts, "; ".join(result.messages))
        self.spool.remove(seg)
        if not self.store_ok:
            self._redrive_at = self._clock()  # an outage ended: what it may have quarantined goes first
        self.store_ok = True
        self.last_error = ""
        if seg.redriven:
            self._redrive_wait = self.redrive_first_s
            log.info("re-driven spool segment %s is in the store", seg.name)
        return True

    def _probe_due(self) -> None:
        """With nothing to write, probe the store when :attr:`probe_every_s` has passed since the last probe."""
        now = self._clock()
        if now - self._probed_at < self.probe_every_s:
            return
        self._probed_at = now
        self.probe()

    def probe(self) -> bool:
        """Whether the store answers now; ``store_ok`` (``store_up``, ``/readyz``) follows the answer.

        A store not yet open (down at start-up) is opened and migrated. An outage that ends re-drives the
        quarantine first, as after a write. Called on the writer's thread (``run``) or before it starts.
        """
        store = self.connect()
        if store is None:
            return False
        try:
            self._check_faults()
            self._answers(store)
        except Exception as exc:  # the engine's or the driver's: the store does not answer
            self._failed(f"the store does not answer: {error_line(exc)}")
            return False
        if not self.store_ok:
            log.info("the store answers again")
            self._redrive_at = self._clock()  # an outage ended: what it may have quarantined goes first
            self.last_error = ""
        self.store_ok = True
        return True

    def _answers(self, store: Store) -> None:
        """``SELECT 1`` on the writer's connection, asked twice when the first answer is wrong or fails: it can be
        what a failed statement left on chDB's session (``schema/migrator.py`` clears it the same way).

        Raises:
            Exception: the second answer failed too (the driver's error), or ``StoreError`` when it was not 1.
        """
        with self.store_lock:
            for last in (False, True):
                try:
                    rows = store.client.query("SELECT 1").result_rows
                except Exception:
                    if last:
                        raise
                    continue
                if rows == [(1,)]:
                    return
                if last:
                    raise StoreError(f"SELECT 1 answered {str(rows)[:80]}")

    def _redrive_due(self) -> None:
        """With nothing else to write, move the oldest quarantined segment back when its time has come."""
        if self._clock() < self._redrive_at:
            return
        waiting = self.spool.quarantined()
        if not waiting:
            self._redrive_at = self._clock() + self._redrive_wait
            return
        seg = self.spool.redrive(waiting[0])
        seg.redriven = True
        self.metrics.inc("redriven_segments")
        self._redrive_at = self._clock() + self._redrive_wait
        self._redrive_wait = min(self._redrive_wait * 2, REDRIVE_MAX_S)
        log.info("re-driving quarantined spool segment %s", seg.name)

    def _refused_while_up(self, store: Store, seg: Segment, reason: str) -> None:
        """Count a failure the store gave while it answered; quarantine the segment at ``quarantine_after``.

        Called for content refusals only. A store that is down fails every segment alike and is waited for
        (the spool grows, then 429/503); a segment the store refuses for its content while answering a probe
        would block every segment behind it for ever.
        """
        if self.faults.store_down:
            return
        try:
            self._answers(store)
        except Exception:
            seg.refused = 0  # the store itself is failing: not this segment's fault
            return
        seg.refused += 1
        if seg.refused < self.quarantine_after:
            return
        path = self.spool.quarantine(seg)
        self.metrics.inc("quarantined_segments")
        self.store_ok = True
        self.last_error = f"spool segment {seg.name} quarantined at {path}: {reason}"
        log.error(
            "spool segment %s refused %d times for its content while the store answered; moved to %s to let "
            "the segments behind it through (it is re-driven automatically). Last error: %s",
            seg.name,
            seg.refused,
            path,
            reason,
        )

    def _check_faults(self) -> None:
        if self.faults.store_down:
            raise StoreError("store unavailable (fault injected by the test-only control)")

    def _failed(self, message: str, *, quiet: bool = False) -> None:
        if not quiet and (self.store_ok or message != self.last_error):
            log.warning("%s", message)
        self.store_ok = False
        self.last_error = message

    def drain(self, timeout: float) -> bool:
        """Seal the open segment and wait until the spool is empty (shutdown, tests)."""
        self.spool.seal_now()
        deadline = time.monotonic() + timeout
        while self.spool.files() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.spool.files() == 0
