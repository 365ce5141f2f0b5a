"""The SDK's background thread: drains the hand-off queue, assembles compile records, classifies
requests and hands finished records to the exporter. Every failure here is caught and counted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

from inferensics.collector.host import capture, profiling, torch_adapter
from inferensics.collector.host.classify import classify
from inferensics.collector.host.config import SdkConfig
from inferensics.collector.host.exporter import Exporter
from inferensics.collector.host.fingerprint import (
    Fingerprint,
    OutputModifiedError,
    PendingFingerprint,
    digest_inputs,
    finish_deferred,
    mark,
)
from inferensics.collector.host.fingerprint_sampling import fingerprint_rules
from inferensics.collector.host.journal import Journal
from inferensics.collector.host.kernel_decisions import KIND as KERNEL_DECISION
from inferensics.collector.host.kernel_decisions import EagerDecisions
from inferensics.collector.host.queueing import BoundedQueue
from inferensics.collector.host.records import GraphSlot, RawRequest
from inferensics.collector.host.shape_policy import ShapePolicy, shape_signature
from inferensics.collector.host.trusted_records import f32, trusted_request, u8, u32
from inferensics.collector.trace.assembler import AssemblyContext, CompileAssembler
from inferensics.collector.trace.envelope import decode_record
from inferensics.schema import columns as col
from inferensics.schema.events import (
    FP_FAILED,
    FP_NONE,
    FP_OK,
    FP_UNSAMPLED,
    CacheEvent,
    CompileEvent,
    GraphBreakEvent,
    KernelInventoryEvent,
    RecompileEvent,
    SdkHealthEvent,
)
from inferensics.schema.graph_calls import graph_call_name
from inferensics.schema.request_attrs import BUNDLE_STATUS
from inferensics.schema.table import Event

log = logging.getLogger("inferensics.collector.host")

PENDING_CAPACITY = 10_000


CPU_POLL_S: Final = 0.002
"""How often the thread drains while requests hand it CPU outputs (for :data:`CPU_POLL_HOLD_S` after the last).

Until the thread has read a CPU output it stays allocated. Held for a whole ``flush_interval_s``, the
outputs made every new output land in fresh memory: page faults on the serving thread (GPT-2-sized logits,
2x32x1000: 18-62 per request). Read within a few milliseconds, the next outputs reuse the memory (0-6 per
request at 2 ms, 4-14 at 5 ms). The serving thread does nothing for it: a wake-up per request cost it ~4 us
(a futex wake); a poll costs this thread one ``time.sleep`` per interval.
"""
CPU_POLL_HOLD_S: Final = 1.0
"""Seconds after the last CPU output during which the thread keeps polling every :data:`CPU_POLL_S`."""
CPU_POLL_MIN_RATE: Final = 0.25
"""The thread polls for CPU outputs only where more than this fraction of them is fingerprinted (held).

At the default rate (one request in 32) the few outputs held until the next drain leave the serving
thread's memory reuse nearly as it is, while polling every :data:`CPU_POLL_S` as requests run cost that
thread more than the fingerprints themselves (a wake-up, a drain of one or two requests and a hand-over
of the GIL each time; benchmarks/bench_sdk_overhead.py ``--served``)."""
YIELD_AFTER_NS: Final = 100_000
"""Longest stretch of record building between two hand-offs of the GIL (see :meth:`Pipeline.drain`), while
the requests drained gave device outputs (or none)."""
CPU_YIELD_AFTER_NS: Final = 2_000_000
"""The same while the requests drained gave CPU outputs (a CPU server).

There the serving thread's kernels run on the CPU, so the time it waits for the GIL is not a device left
idle, and each hand-over costs both threads a wake-up of the other, several times the record building it
lets through in a virtual machine (10-40 us of CPU per ``time.sleep(0)`` measured on the 2-core benchmark
box: at 100 us pacing, about a third of the background thread's CPU per request). One hand-off per
2 ms of work keeps that to a few percent of it, and the serving thread's wait to at most 2 ms per drain
(a drain is a few ms every ``flush_interval_s``); the interpreter's own switch interval bounds it too."""


class _GilHandOff:
    """Hands the GIL to the serving thread at most every :data:`YIELD_AFTER_NS` of background work.

    ``time.sleep(0)`` releases the GIL long enough (the kernel's timer slack, ~50 µs) for a waiting
    thread to take it; a serving thread that wants it back while this thread builds records would
    otherwise wait for the interpreter's switch interval (5 ms). Each hand-off costs this thread a
    system call and a reschedule (~10-20 µs of CPU), so it is paced by time rather than made per record;
    the numpy passes of a CPU fingerprint release the GIL on their own as well.
    """

    __slots__ = ("_active", "_next", "_period")

    def __init__(self, active: bool = True, period_ns: int = YIELD_AFTER_NS) -> None:
        self._active = active  # off on a flushing caller's thread: nobody waits for the GIL it holds
        self._period = period_ns
        self._next = time.perf_counter_ns() + period_ns

    def __call__(self) -> None:
        if self._active and time.perf_counter_ns() >= self._next:
            time.sleep(0)
            self._next = time.perf_counter_ns() + self._period


class _Prepared(NamedTuple):
    """A request record built when the request is drained, all but what needs its output fingerprint
    (its ``fp_*`` fields, and the inputs' digest and capture, which the fingerprint decides): a request
    whose fingerprint is still on the device waits with its record built, so that what follows the
    device's write is only the fold of the fingerprint's numbers (a flush that waits for the device does
    no record building after it)."""

    values: dict[str, Any]
    children: Sequence[Event]


WATCH_STALE_S: Final = 2.0
"""Seconds after its request began that a watched fingerprint still unwritten gets a completion event
(:meth:`PendingFingerprint.watch_with_event`), so that a kernel that never ran cannot hold the records
behind it until a flush."""
SIGNATURE_LIMIT: Final = 4096
"""Shape signatures the pipeline remembers (a flood of new shapes is signed each time, not cached)."""
TEMPLATE_LIMIT: Final = 1024
"""Dispatch templates kept (one per set of graphs and guard outcome; cleared by every compile record)."""


class Pipeline:
    """Consumes ``("trace", ...)`` and ``("request", RawRequest)`` items in order."""

    def __init__(
        self,
        queue: BoundedQueue,
        exporter: Exporter,
        context: AssemblyContext,
        config: SdkConfig,
        *,
        traffic_class: str = "",
    ) -> None:
        self.queue = queue
        self.exporter = exporter
        self.context = context
        self.config = config
        self.default_traffic_class = traffic_class
        self.shapes = ShapePolicy(config.shape_buckets)
        self._signatures: dict[Any, str] = {}  # serving shapes repeat
        self.assembler = CompileAssembler(
            context, self._on_record, exporter.put_blob, entry_bytes=torch_adapter.cache_entry_bytes
        )
        self.pending: OrderedDict[str, list[Event]] = OrderedDict()
        self.waiting: deque[tuple[RawRequest, _Prepared]] = deque()
        self.limit_hit = False
        # A compile failed with the error suppressed: Dynamo runs that frame eagerly from then on (classify).
        self.failed_suppressed = False
        self.graphless_break = ""  # registry id of the last break before any op of a frame (classify)
        # perf_counter_ns when the tracker installed the guard-complete hook (None: not installed): requests
        # that entered their scope since are counted by it (_guard_counts).
        self.guards_counted_since: int | None = None
        self._last_break = ("", "")
        self._feeding_suppressed = False
        self.kernel_artifacts: dict[str, str] = {}
        self.eager_decisions = EagerDecisions(queue, context)  # the kernel registry's eager decisions, as rows
        # Request fields that follow from the dispatch (classification, graph keys and artifacts), per
        # (graphs called, any guard hit, any guard miss, recompile limit hit before, a suppressed compile
        # failure before) of requests that
        # compiled nothing, raised nothing and have no sub-records: in steady serving nearly all of them.
        self.templates: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.unmarked: list[PendingFingerprint] = []
        self.counters: Counter[str] = Counter()
        self.last_error = ""
        self.health_source: Callable[[], dict[str, int]] | None = None
        self.journal: Journal | None = None  # the tracker's crash journal: graph keys by generated module
        self._next_health = time.monotonic() + config.health_interval_s
        self._started_ms = int(time.time() * 1000)  # with the pid, names this process in its health records
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poll_fast_until = 0.0  # monotonic time until which the thread drains every CPU_POLL_S
        self._poll_cpu = fingerprint_rules(config)[0].rate > CPU_POLL_MIN_RATE
        self._yield_ns = YIELD_AFTER_NS  # the hand-off pacing of the next drain: per the last request's output
        self._thread = threading.Thread(target=self._run, name="inferensics-sdk", daemon=True)
        self._thread.start()

    # --- thread --------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.eager_decisions.log is None:  # the kernel registry, once something in the process builds it
                self.eager_decisions.attach()
            journal = self.journal
            if journal is not None:
                with contextlib.suppress(ValueError, struct.error):  # closed by the tracker's shutdown just now
                    journal.beat()
            if len(self.queue) or self.waiting:
                self.drain()
            if self.config.health_interval_s and time.monotonic() >= self._next_health:
                self._next_health = time.monotonic() + self.config.health_interval_s
                self.export_health()
            if not len(self.queue):
                if time.monotonic() < self._poll_fast_until:
                    time.sleep(CPU_POLL_S)  # one system call: an Event's timed wait costs several times more
                else:
                    self._stop.wait(self.config.flush_interval_s)

    def export_health(self, *, stopped: bool = False) -> None:
        """Export one ``sdk_health`` record from the tracker's counters (never raises); ``stopped`` marks the
        last record of a clean shutdown."""
        source = self.health_source
        if source is None:
            return
        try:
            s = source()
            refused = {k.removeprefix("export_refused_"): v for k, v in s.items() if k.startswith("export_refused_")}
            dropped = s.get("dropped", 0) + s.get("export_spans_unaccounted", 0)
            errors = sum(v for k, v in s.items() if k.endswith("_errors"))
            health = getattr(self.exporter, "health", None)
            ctx = self.context
            record = SdkHealthEvent(
                ts=datetime.now(UTC),
                host=ctx.host,
                model=ctx.model,
                hw_pool=ctx.hw_pool,
                requests_seen=s.get("requests", 0),
                queue_depth=min(s.get("queue_len", 0), 2**32 - 1),
                records_dropped=dropped,
                spans_sent=s.get("export_spans_sent", 0),
                spans_refused=sum(refused.values()),
                refused_auth=refused.get("auth", 0),
                refused_down=refused.get("down", 0),
                refused_back_pressure=refused.get("back_pressure", 0),
                sdk_errors=errors,
                last_error=(getattr(health, "last_error", "") or self.last_error)[:500],
                kernel_failures=s.get(col.KERNEL_FAILURES, 0),
                kernel_fallbacks=s.get(col.KERNEL_FALLBACKS, 0),
                kernel_unproven=s.get(col.KERNEL_UNPROVEN, 0),
                kernel_untraceable=s.get(col.KERNEL_UNTRACEABLE, 0),
                stopped=stopped,
                interval_s=self.config.health_interval_s,
                process=f"{os.getpid()}@{self._started_ms}",  # a forked child is another process
                requests_lost=s.get(col.REQUESTS_LOST, 0),  # dead processes' unexported requests (tracker_journal)
                dead_processes=s.get(col.DEAD_PROCESSES, 0),
                requests_recovered=s.get(col.REQUESTS_RECOVERED, 0),  # their requests in flight, exported here
            )
            with self._lock:
                self.exporter.export_records([record])
            self.counters["health_records"] += 1
        except Exception as exc:
            self.counters["health_errors"] += 1
            self.last_error = f"{type(exc).__name__}: {exc}"

    def drain(self, *, block: bool = False) -> None:
        """Process everything queued (also called by ``flush`` on the caller's thread).

        A request whose output fingerprint is still on its way from the device waits in ``waiting``
        (classified already, in arrival order) until its CUDA event has completed; ``block`` waits for
        them instead. Polling the event rather than waiting on it keeps this thread from spinning on the
        device and from trading the GIL with the serving thread once per request.
        """
        with self._lock:
            # A flush (block) runs on a caller's thread, usually the serving one: handing the GIL over there
            # only put a sleep into the caller's own time.
            hand_off = _GilHandOff(threading.current_thread() is self._thread, self._yield_ns)
            # Waits for the device only once the queue is empty: every queued request's record is built
            # first (while the device still runs), then only the fingerprints' folds follow the wait.
            self._finish_waiting(False, hand_off)
            while True:
                items = self.queue.drain()
                if not items:
                    if block and self.waiting:
                        self._finish_waiting(True, hand_off)
                        continue
                    break
                self._batch_cpu_fingerprints(items)
                for kind, item in items:
                    # On the H200 in the default mode (launch-bound decode) the thread draining while
                    # requests ran, without hand-offs, cost 4-5 % against the same work done idle (in flush).
                    hand_off()
                    try:
                        if kind == "trace":
                            self._trace(item)
                        elif kind == "record":  # a finished event (bundle registration or miss)
                            self._on_record(item)
                        elif kind == KERNEL_DECISION:  # an eager call's provider decision
                            row = self.eager_decisions.row(item)
                            if row is not None:
                                self.exporter.export_records([row])
                                self.counters["kernel_decisions"] += 1
                        elif kind == "recovered":  # a dead process's request, from its crash journal
                            self.counters["requests_recovered"] += 1
                            self.exporter.export_request(item, ())
                        else:
                            self._request(item)
                    except Exception as exc:  # never let one bad record stop the thread
                        self.counters["process_errors"] += 1
                        self.last_error = f"{type(exc).__name__}: {exc}"
                self._mark()
                self._finish_waiting(False, hand_off)

    def _batch_cpu_fingerprints(self, items: list[tuple[str, Any]]) -> None:
        """Fingerprint the CPU outputs of the requests just taken off the queue together (finish_deferred)."""
        deferred = [
            item.fingerprint
            for kind, item in items
            if kind == "request"
            and isinstance(item.fingerprint, PendingFingerprint)
            and item.fingerprint.stream is None
        ]
        if len(deferred) > 1:
            try:
                finish_deferred(deferred)
            except Exception as exc:  # each result() computes its own instead
                self.counters["process_errors"] += 1
                self.last_error = f"{type(exc).__name__}: {exc}"

    def _mark(self) -> None:
        """One CUDA event per stream behind the fingerprints of the requests just taken off the queue."""
        if self.unmarked:
            try:
                mark(self.unmarked)
            except Exception as exc:  # result() marks (or waits) on its own
                self.counters["process_errors"] += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
            self.unmarked = []

    def _finish_waiting(self, block: bool, hand_off: _GilHandOff) -> None:
        waiting = self.waiting
        while waiting:
            raw, prepared = waiting[0]
            fp = raw.fingerprint
            pending_fp = isinstance(fp, PendingFingerprint) and not fp.ready()
            if pending_fp and not block and len(waiting) <= PENDING_CAPACITY:
                if time.time() - raw.ts > WATCH_STALE_S:  # unwritten this long: its launch may have failed
                    fp.watch_with_event()
                return
            waiting.popleft()
            hand_off()
            try:
                self._finish(raw, *prepared)
            except Exception as exc:
                self.counters["process_errors"] += 1
                self.last_error = f"{type(exc).__name__}: {exc}"

    def flush(self) -> None:
        """Drain (waiting for fingerprints still on the device), export orphan sub-records, flush."""
        self.eager_decisions.attach()  # a registry built since the thread last looked: its decisions so far
        self.drain(block=True)
        with self._lock:
            try:
                orphans = [e for children in self.pending.values() for e in children]
                self.pending.clear()
                if orphans:
                    self.exporter.export_records(orphans)
                self.exporter.flush()
            except Exception as exc:
                self.counters["export_errors"] += 1
                self.last_error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> None:
        """Export a last health record, flush, stop the thread and shut the exporter down."""
        if self.config.health_interval_s:
            self.drain(block=True)  # the last record counts every request
            self.export_health(stopped=True)  # stopped on purpose: the dashboard does not call it quiet
        self.flush()
        self._stop.set()
        self._thread.join(timeout=5)
        self.eager_decisions.detach()
        with self._lock:
            self.assembler.finish()
            try:
                self.exporter.shutdown()
            except Exception as exc:
                self.counters["export_errors"] += 1
                self.last_error = f"{type(exc).__name__}: {exc}"

    # --- records -------------------------------------------------------------------------------------

    def _trace(self, item: tuple[Any, ...]) -> None:
        """One sink item: ``(metadata, payload, request id, time, failure suppressed, origin)``."""
        metadata, payload, request_id, t, suppressed, origin = item
        self.templates.clear()  # compile state changes: summaries, limit, kernel artifacts
        env = decode_record(metadata, payload, ts=datetime.fromtimestamp(t, UTC))
        self._feeding_suppressed = suppressed  # read by _on_record for the compile record this may finish
        try:
            self.assembler.feed(env, request_id, origin)
        finally:
            self._feeding_suppressed = False

    def _on_record(self, record: Event) -> None:
        if isinstance(record, CompileEvent) and record.outcome == "recompile_limit":
            self.limit_hit = True
        if isinstance(record, CompileEvent) and record.outcome == "failed" and self._feeding_suppressed:
            self.failed_suppressed = True
        if isinstance(record, GraphBreakEvent):  # emitted before its compile's record
            self._last_break = (record.compile_id, record.registry_id or "unknown")
        if (
            isinstance(record, CompileEvent)
            and record.outcome == "ok"
            and not record.graph_key
            and self._last_break[0] == record.compile_id
        ):
            # A frame that broke before any tensor op: its later calls hit guards and run no graph.
            self.graphless_break = self._last_break[1]
        if isinstance(record, CompileEvent) and record.fx_cache_key and record.artifact_id:
            self.kernel_artifacts[graph_call_name(record.fx_cache_key)] = record.artifact_id
        if self.journal is not None and isinstance(record, CompileEvent) and record.artifact_id and record.graph_key:
            try:
                self.journal.note_graph(record.artifact_id, record.graph_key)
            except (OSError, ValueError):
                self.counters["journal_errors"] += 1
        if isinstance(record, KernelInventoryEvent):
            self.kernel_artifacts[record.kernel_name] = record.artifact_id
        self.counters[type(record).TABLE.name] += 1
        rid = getattr(record, "request_id", "")
        if isinstance(record, GraphBreakEvent | CacheEvent | RecompileEvent) and rid:
            self.pending.setdefault(rid, []).append(record)
            while len(self.pending) > PENDING_CAPACITY:
                _, orphans = self.pending.popitem(last=False)
                self.exporter.export_records(orphans)
            return
        self.exporter.export_records([record])

    def _request(self, raw: RawRequest) -> None:
        # The serving thread hands the labels over as the caller gave them: a non-string label would fail
        # the export of the whole batch it lands in.
        if not (raw.model.__class__ is raw.traffic_class.__class__ is raw.tenant.__class__ is str):
            labels = (raw.model, raw.traffic_class, raw.tenant)
            raw.model, raw.traffic_class, raw.tenant = (str(v or "") for v in labels)
        graphs = raw.graph_counts()
        calls = sum([v[0] for v in graphs.values()])
        hits, misses = self._guard_counts(raw, graphs, calls)
        # More guard hits than graph calls: some frame hit its guards and ran no graph of its own (looked at
        # only once a frame broke before any op: nearly never).
        graphless = self.graphless_break if hits > calls else ""
        if raw.compile_ids or raw.error or raw.compile_ns or raw.profile is not None or raw.request_id in self.pending:
            key = None
        else:
            key = (*graphs, hits > 0, misses > 0, self.limit_hit, self.failed_suppressed, graphless)
        dispatch = self.templates.get(key) if key is not None else None
        if dispatch is None:
            dispatch = self._dispatch(raw, graphs, hits, misses, graphless)
            if key is not None and len(self.templates) < TEMPLATE_LIMIT:
                self.templates[key] = dispatch
        if not raw.model:  # no label given to the request: its first graph's (tracker.compile's name)
            raw.model = dispatch["model"]
        ts = datetime.fromtimestamp(raw.ts, UTC)
        # No sub-records (nearly every request): a shared empty tuple rather than a new list each time.
        children: Sequence[Event] = self.pending.pop(raw.request_id, ()) if self.pending else ()
        if children:  # a recompile row carries the traffic class of the request that triggered it
            traffic = raw.traffic_class or self.default_traffic_class
            children = [
                c.model_copy(update={"traffic_class": traffic})
                if isinstance(c, RecompileEvent) and traffic and not c.traffic_class
                else c
                for c in children
            ]
        if raw.profile is not None:
            children = [*children, *profiling.kernel_timings(raw, self.context, self.kernel_artifacts, ts)]
        # Everything order-dependent (classification against the compile state, sub-records) is done;
        # the rest needs the fingerprint.
        values = self._values(raw, graphs, dispatch, ts)
        self._yield_ns = CPU_YIELD_AFTER_NS if raw.cpu_output else YIELD_AFTER_NS
        fp = raw.fingerprint  # None: nothing to wait for (unsampled, or no output), in order behind any waiting
        wait = bool(self.waiting)
        if isinstance(fp, PendingFingerprint):
            # A CPU output the serving thread keeps alive until read: poll while most outputs are held.
            if self._poll_cpu and fp.stream is None:
                self._poll_fast_until = time.monotonic() + CPU_POLL_HOLD_S
            if fp.unmarked():
                self.unmarked.append(fp)
                wait = True
            elif not wait and not fp.ready():
                wait = True
        if wait:
            self.waiting.append((raw, _Prepared(values, children)))
        else:  # nearly every request on a CPU server: finished at once
            self._finish(raw, values, children)

    def _guard_counts(self, raw: RawRequest, graphs: dict[GraphSlot, list[int]], calls: int) -> tuple[int, int]:
        """``(guard hits, guard misses)`` of the request's compiled frames (``calls``: its graph calls in all).

        Counted by Dynamo's guard-complete hook for a request that entered its scope after the hook went in
        (``guards_counted_since``, see ``Tracker._count_guards``); before, when every compile had given a
        graph of ours, each frame's call that hit its guards is a call of its graph (less the first call of
        a graph compiled in the request) and each miss a recompile of the request."""
        since = self.guards_counted_since
        if since is not None and raw._t0 >= since:
            return raw.guard_hits, raw.guard_misses
        compiled = raw.compile_ids
        if not compiled:
            return calls, 0
        hits = sum([max(v[0] - (slot.compile_id in compiled), 0) for slot, v in graphs.items()])
        summaries = self.assembler.summaries
        misses = sum(1 for c in dict.fromkeys(compiled) if c in summaries and summaries[c].recompile)
        return hits, misses

    def _dispatch(
        self, raw: RawRequest, graphs: dict[GraphSlot, list[int]], hits: int, misses: int, graphless: str
    ) -> dict[str, Any]:
        """The request fields that follow from its dispatch (``graphs``: ``raw.graph_counts()``; ``hits``,
        ``misses``: :meth:`_guard_counts`; ``graphless``: the break of a frame that hit and ran no graph, if
        any): classification, graph keys and artifacts."""
        summaries = self.assembler.summaries
        compiles = [summaries[c] for c in dict.fromkeys(raw.compile_ids) if c in summaries]
        slots = list(graphs)
        cls = classify(
            errored=bool(raw.error),
            guard_hits=hits,
            guard_misses=misses,
            compiles=compiles,
            graph_compile_ids=[s.compile_id for s in slots],
            summaries=summaries,
            limit_hit_before=self.limit_hit,
            backend_compile_ms=raw.compile_ns / 1e6,
            failed_before=self.failed_suppressed,
            graphless_break=graphless,
        )
        keys, artifacts, models = [], [], []
        for s in slots:
            summary = summaries.get(s.compile_id)
            keys.append(summary.graph_key if summary else "")
            artifacts.append(summary.artifact_id if summary else "")
            models.append(summary.model if summary else "")
        return {
            "model": next((m for m in models if m), self.context.model),
            "outcome": cls.outcome,
            "guard_outcome": cls.guard_outcome,
            "cache_status": cls.cache_status,
            "fallback_reason": cls.fallback_reason,
            "compile_ms": f32(cls.compile_ms),
            "recompiles": u8(cls.recompiles),
            "graph_keys": tuple(keys),
            "graph_artifacts": tuple(artifacts),
            "attrs": {"compile_ids": ",".join(s.compile_id for s in slots)} if slots else {},
        }

    def _values(
        self, raw: RawRequest, graphs: dict[GraphSlot, list[int]], dispatch: dict[str, Any], ts: datetime
    ) -> dict[str, Any]:
        """The request record's fields, the fingerprint's and the inputs' left empty (``_finish`` fills them).

        A copy of the dispatch's record (every field in RequestEvent's order, the values it shares with
        every request served the same way) with the request's own values set: cheaper than a literal of
        every field, per request, on the thread that competes with serving for the GIL."""
        base = dispatch.get("record")
        if base is None:
            base = dispatch["record"] = self._record_base(dispatch)
        values = base.copy()
        values["request_id"] = raw.request_id
        values["ts"] = ts
        values["model"] = raw.model
        if raw.traffic_class:
            values["traffic_class"] = raw.traffic_class
        values["tenant"] = raw.tenant
        shape = self._signature(raw.shape)
        values["shape"] = shape
        values["shape_bucket"] = self.shapes.bucket(shape) if shape else ""
        values["latency_ms"] = f32(raw.latency_ns / 1e6)
        error = raw.error
        if error:
            values["status"] = "error"
            values["error"] = error[:2000]
        counts = graphs.values()
        values["graph_calls"] = tuple([u32(v[0]) for v in counts])
        values["graph_us"] = tuple([u32(v[1] // 1000) for v in counts])
        values["fp_rate"] = raw.fp_rate  # rounded as the column rounds it once, by its rule
        if raw.sampled:
            values["sampled"] = True
        attrs = dispatch["attrs"]
        if raw.bundle_status:
            attrs = {**attrs, BUNDLE_STATUS: raw.bundle_status}
            if raw.bundle_unqualified:  # set only inside a call that set bundle_status first (bundle_guard)
                attrs.update(raw.bundle_unqualified.attrs())
            values["attrs"] = attrs
        else:  # every record its own dict (the base's and the dispatch's are shared)
            values["attrs"] = attrs.copy() if attrs else {}
        return values

    def _signature(self, shape: Any) -> str:
        """The shape signature of a request's ``shape`` as given (``(2, 128)`` → ``2x128``; ``""`` and a
        counted ``shape_errors`` for one that is not a sequence of integers)."""
        try:
            return self._signatures[shape]
        except (KeyError, TypeError):  # not seen yet, or unhashable
            pass
        try:
            signature = shape_signature(shape)
        except Exception as exc:
            self.counters["shape_errors"] += 1
            self.last_error = f"shape_errors: {exc}"
            if self.counters["shape_errors"] == 1:
                log.warning(
                    "inferensics: %s; the request is stored without a shape. Pass tracker.request(shape=...) a "
                    "tuple of integers such as (2, 128). Counted in stats() as shape_errors.",
                    str(exc)[:200],
                )
            return ""
        if len(self._signatures) < SIGNATURE_LIMIT and isinstance(shape, (tuple, str)):
            self._signatures[shape] = signature  # a tuple of integers (signed above): hashable
        return signature

    def _finish(self, raw: RawRequest, values: dict[str, Any], children: Sequence[Event]) -> None:
        fp = self._fingerprint(raw) if raw.fingerprint is not None else None
        if fp is not None:
            fp_status = FP_OK
            values["fp_argmax_digest"] = fp.argmax_digest
            values["fp_argmax_head"] = fp.argmax_head
            values["fp_nan"] = u32(fp.nan)
            values["fp_inf"] = u32(fp.inf)
            values["fp_mean"] = f32(fp.mean)
            values["fp_std"] = f32(fp.std)
            values["fp_absmax"] = f32(fp.absmax)
        elif raw.fp_status:  # set_output skipped it (the sampling rule) or failed (counted there)
            fp_status = raw.fp_status
            if fp_status == FP_UNSAMPLED:
                self.counters["fingerprint_unsampled"] += 1
        elif raw.fingerprint is not None:  # could not be read back (counted by _fingerprint)
            fp_status = FP_FAILED
        else:
            fp_status = FP_NONE
        values["fp_status"] = fp_status
        if raw.inputs:
            values["input_digest"], values["capture_blob"] = self._inputs(raw, fp)
        self.counters["requests"] += 1
        self.exporter.export_request(trusted_request(values, check=False), children)

    def _record_base(self, dispatch: dict[str, Any]) -> dict[str, Any]:
        """Every field of a request record in RequestEvent's order, with the values of ``dispatch`` and of
        this host, and each request's own fields at their defaults (values canonical: see trusted_records)."""
        ctx = self.context
        return {
            "request_id": "",
            "ts": None,
            "host": ctx.host,
            "model": ctx.model,
            "hw_pool": ctx.hw_pool,
            "traffic_class": self.default_traffic_class,
            "tenant": "",
            "bundle_id": ctx.bundle_id,
            "shape": "",
            "shape_bucket": "",
            "latency_ms": 0.0,
            "status": "ok",
            "error": "",
            "outcome": dispatch["outcome"],
            "guard_outcome": dispatch["guard_outcome"],
            "cache_status": dispatch["cache_status"],
            "fallback_reason": dispatch["fallback_reason"],
            "compile_ms": dispatch["compile_ms"],
            "recompiles": dispatch["recompiles"],
            "graph_keys": dispatch["graph_keys"],
            "graph_artifacts": dispatch["graph_artifacts"],
            "graph_calls": (),
            "graph_us": (),
            "input_digest": "",
            "fp_argmax_digest": "",
            "fp_argmax_head": (),
            "fp_nan": 0,
            "fp_inf": 0,
            "fp_mean": 0.0,
            "fp_std": 0.0,
            "fp_absmax": 0.0,
            "fp_status": FP_NONE,
            "fp_rate": 0.0,
            "sampled": False,
            "capture_blob": "",
            "attrs": {},
        }

    def _fingerprint(self, raw: RawRequest) -> Fingerprint | None:
        """The output fingerprint, or ``None`` (counted) when the output could not be read back: the
        request's record is exported either way."""
        pending = raw.fingerprint
        if not isinstance(pending, PendingFingerprint):
            return None
        if pending.backlogged:  # the torch ops instead of the fused kernel: more device time, same numbers
            self.counters["fingerprint_backlogged"] += 1
        try:
            return pending.result()
        except OutputModifiedError:
            self.counters["fingerprint_output_modified"] += 1
            return None
        except Exception as exc:
            self.counters["fingerprint_errors"] += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return None

    def _inputs(self, raw: RawRequest, fp: Fingerprint | None) -> tuple[str, str]:
        """``(input digest, capture blob)``; inputs that cannot be read or captured (not tensors, a
        redaction hook that raises, a failed blob upload) are counted and leave the record without them."""
        try:
            digest = digest_inputs(raw.inputs)
        except Exception as exc:
            self.counters["capture_errors"] += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return "", ""
        try:
            return digest, self._capture(raw, fp)
        except Exception as exc:
            self.counters["capture_errors"] += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return digest, ""

    def _capture(self, raw: RawRequest, fp: Fingerprint | None) -> str:
        rules = self.config.capture
        if not rules.enabled or not raw.inputs:
            return ""
        decision = capture.decide(
            rules,
            request_id=raw.request_id,
            model=raw.model,
            traffic_class=raw.traffic_class,
            error=bool(raw.error),
            nonfinite=bool(fp and (fp.nan or fp.inf)),
        )
        if not decision.capture:
            return ""
        data = capture.serialize_inputs(rules, raw.inputs)
        if data is None:
            self.counters["capture_over_cap"] += 1
            return ""
        self.counters["captures"] += 1
        return self.exporter.put_blob(data, "inputs", {"request_id": raw.request_id, "why": decision.why})

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Block until the queue is empty (tests and ``flush``)."""
        deadline = time.monotonic() + timeout_s
        while len(self.queue) and time.monotonic() < deadline:
            time.sleep(0.005)
