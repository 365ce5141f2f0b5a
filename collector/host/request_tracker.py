"""The tracker: installs the hooks, compiles through the instrumented backend and scopes requests.

>>> tracker = instrument(store=store, host="h1", hw_pool="cpu", model="tiny")     # doctest: +SKIP
>>> compiled = tracker.compile(model, mode="max-autotune-no-cudagraphs")         # doctest: +SKIP
>>> with tracker.request("req-1", traffic_class="interactive", shape=(2, 128)) as req:  # doctest: +SKIP
...     req.set_output(compiled(x))
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any
from zlib import crc32 as _crc32

import torch

from inferensics.collector.errors import ConfigError
from inferensics.collector.host import profiling, torch_adapter
from inferensics.collector.host.backend import InductorBackend
from inferensics.collector.host.config import SdkConfig
from inferensics.collector.host.dynamo_hooks import chained_guard_hook, guard_hook, root_locations, user_context
from inferensics.collector.host.exporter import Exporter
from inferensics.collector.host.fingerprint import start_fingerprint
from inferensics.collector.host.fingerprint_sampling import HASH_MASK, HASH_MIX, fingerprint_rules
from inferensics.collector.host.journal import HEADER_BYTES, LAST_SLOT, SLOT_BYTES, Journal, write_slot
from inferensics.collector.host.pipeline import Pipeline
from inferensics.collector.host.process_lifecycle import deactivate
from inferensics.collector.host.queueing import BoundedQueue
from inferensics.collector.host.records import CURRENT, CompileOrigin, RawRequest
from inferensics.collector.host.trace_sink import TraceSink
from inferensics.collector.host.tracker_journal import JOURNAL, open_journal, release_dead_journals
from inferensics.collector.host.tracker_stats import ALWAYS_COUNTED, collect_stats
from inferensics.collector.trace.artifacts import PROCESS_ARTIFACT
from inferensics.collector.trace.assembler import AssemblyContext
from inferensics.schema.events import FP_FAILED, FP_UNSAMPLED
from inferensics.schema.processes import PROCESS_ATTR

if TYPE_CHECKING:
    from inferensics.collector.host.journal_recovery import DeadJournal

log = logging.getLogger("inferensics.collector.host")

__all__ = ["ALWAYS_COUNTED", "JOURNAL", "RequestScope", "Tracker"]


class RequestScope(RawRequest):
    """The context manager returned by :meth:`Tracker.request`; ``set_output`` records the fingerprint.

    The scope is the request's :class:`RawRequest` itself (one object per request on the serving thread,
    handed to the background thread as it is at exit). Its methods are the serving path: each does its work
    in its own frame, with no further Python call on the common path (``records.RawRequest``).

    Which request a call counts in: the one the calling code's context (``contextvars``) holds, set by the
    scope's ``with`` line and put back by its end. Each thread and each ``asyncio`` task has its own context.
    Generators do not: two streams (generators that each keep a scope open across their ``yield``) stepped
    in turn by one thread or task share one context, and a call counts in the scope whose ``with`` line ran
    last there, whichever stream makes it. After stream A entered its scope and then B entered its own,
    A's calls count in B's request; when A's scope ends first, its end puts back what its entry found (no
    request, or an outer scope), and B's further calls count there; a scope's end that would put back a
    request that has ended puts back none. The SDK cannot tell the streams apart without work on every
    compiled call (a resumed generator runs no code of the SDK's; naming the caller would take a walk of the
    stack per call), so it does not. Step each stream in a context of its own instead, as an ``asyncio``
    task is: ``context = contextvars.copy_context()`` once per stream, then ``context.run(next, stream)``
    for each step (``tests/collector/host/test_request_scopes.py`` pins both behaviours).

    Executor threads neither: ``loop.run_in_executor(pool, fn)`` runs ``fn`` on a pool thread in that thread's own
    context (asyncio copies the caller's context to tasks and callbacks, not to executors), so the compiled calls
    ``fn`` makes inside a request's scope count in no request (a pool thread holds none). Copying the context on
    every compiled call would cost the serving path; the SDK does not. Hand the context over where the work moves:
    ``loop.run_in_executor(pool, contextvars.copy_context().run, fn, *args)``, or ``asyncio.to_thread(fn, *args)``,
    which does that (the same test module pins both behaviours).
    """

    __slots__ = ()

    @property
    def raw(self) -> RawRequest:
        """The request's record as the hooks fill it (the scope itself)."""
        return self

    def __enter__(self) -> RequestScope:
        tracker = self._tracker
        if tracker.profiling and profiling.is_sampled(self.request_id, tracker.config.sample_rate):
            try:
                self._profile = profiling.start_profiler()
                self.sampled = True
            except Exception:
                tracker.counters_local["profiler_errors"] += 1
        journal = tracker.journal
        if journal is not None:
            # Journal.begin inlined: the id of a request in flight, for a process that dies in it, and the ring's lap.
            try:
                slot = journal.next_slot
                journal.next_slot = slot + SLOT_BYTES if slot < LAST_SLOT else HEADER_BYTES
                if slot == HEADER_BYTES:
                    journal.lap += 1
                rid = self.rid_bytes = self.request_id.encode()  # set_output's sampling hash reads it too
                write_slot(journal.view, slot, rid, journal.lap)
                self._jslot = slot
            except Exception:  # an id that is not UTF-8, or closed by a shutdown on another thread
                tracker.counters_local["journal_errors"] += 1
        self._token = CURRENT.set(self)
        self._t0 = time.perf_counter_ns()
        return self

    def set_output(self, output: Any) -> None:
        """Record the output fingerprint (argmax ids, NaN/inf counts, statistics) without a device sync.

        Only requests the sampling rule chooses are fingerprinted (``SdkConfig.fingerprint_rate``: by
        default every request with a device output, one in 32 with a CPU output); the others are recorded
        as ``unsampled``.
        """
        tracker = self._tracker
        try:
            if not isinstance(output, torch.Tensor):
                output = getattr(output, "logits", output)
                if not isinstance(output, torch.Tensor):
                    return
            cpu = self.cpu_output = output.is_cpu
            rule = tracker.fingerprint_cpu if cpu else tracker.fingerprint_device
            self.fp_rate = rule.recorded
            # FingerprintRule.chosen with request_hash inlined: two Python calls fewer on every request
            # (test_fingerprint_sampling pins that both choose the same requests).
            if (
                rule.every
                or (_crc32(self.rid_bytes or self.request_id.encode()) * HASH_MIX) & HASH_MASK < rule.threshold
            ):
                self.fingerprint = start_fingerprint(output, tracker.config.fingerprint_head)
            else:
                self.fp_status = FP_UNSAMPLED
        except Exception:
            tracker.counters_local["fingerprint_errors"] += 1
            self.fp_status = FP_FAILED

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        now = time.perf_counter_ns()
        token, self._token = self._token, None
        tracker = self._tracker
        if token is None:  # exited twice, or never entered: the record (if any) is already queued
            tracker.counters_local["scope_errors"] += 1
            return
        self.latency_ns = now - self._t0
        try:
            CURRENT.reset(token)
        except (ValueError, RuntimeError):  # exited in another thread or context than it was entered in
            tracker.counters_local["scope_errors"] += 1
        else:
            # The scope this one was entered in has ended already: it was exited out of order (two requests'
            # generators interleaved on one thread) or on another thread, which cannot reset this thread's value.
            # Restored, it would collect every later call and compile on this thread: none is current instead.
            previous = token.old_value
            if previous.__class__ is RequestScope and previous._token is None:
                CURRENT.set(None)
        if exc is not None:
            self.error = _describe(exc)
        if self._jslot:
            journal = tracker.journal
            if journal is not None:  # None: shut down meanwhile, and its files are gone
                try:
                    journal.view[self._jslot] = 0  # Journal.end inlined
                except ValueError:  # closed by a shutdown on another thread just now
                    tracker.counters_local["journal_errors"] += 1
        if self._profile is not None:
            try:
                profiling.stop_profiler(self._profile)
                self.profile = self._profile
            except Exception:
                tracker.counters_local["profiler_errors"] += 1
        # BoundedQueue.put inlined (one Python call fewer on every request's exit).
        queue = tracker.queue
        items = queue.items
        if len(items) < queue.capacity:
            items.append(("request", self))
            queue.accepted += 1
        else:
            queue.dropped["request"] += 1
            if not queue.capacity:
                _say_unrecorded(tracker, self.request_id)


class Tracker:
    """One per serving process. Create with :func:`instrument`; see the module docstring."""

    def __init__(
        self,
        exporter: Exporter,
        *,
        host: str,
        hw_pool: str = "",
        model: str = "",
        bundle_id: str = "",
        traffic_class: str = "",
        config: SdkConfig | None = None,
    ) -> None:
        from collections import Counter

        self.config = config or SdkConfig()
        self.host, self.hw_pool, self.model, self.bundle_id = host, hw_pool, model, bundle_id
        self.queue = BoundedQueue(self.config.queue_capacity)
        self.fingerprint_cpu, self.fingerprint_device = fingerprint_rules(self.config)
        self.counters_local: Counter[str] = Counter()
        self.capabilities = torch_adapter.probe_capabilities()
        # Names this process on its compile-side rows and in its trace log (inferensics.schema.processes).
        self.process = f"{host} pid {os.getpid()} at {datetime.now(UTC).isoformat(timespec='microseconds')}"
        context = AssemblyContext(
            host=host,
            model=model,
            hw_pool=hw_pool,
            bundle_id=bundle_id,
            source="live",
            attrs={PROCESS_ATTR: self.process},
        )
        self.pipeline = Pipeline(self.queue, exporter, context, self.config, traffic_class=traffic_class)
        self.pipeline.health_source = self.stats
        self.exporter = exporter
        self.journal: Journal | None = None
        self.dead_journals: list[DeadJournal] = []  # held until their recovered rows are delivered (tracker_journal)
        open_journal(self, traffic_class)  # sets self.journal and self.dead_journals
        self._sink: TraceSink | None = None
        self._previous_guard_hook: Any = None
        self._guard_installed = False
        self._guard_lock = threading.Lock()
        self._unregister_context: Callable[[], None] | None = None
        self._closed = False
        self._forked = False  # the parent's tracker, in a forked child (after_fork_in_child)
        self.successor: Tracker | None = None  # the tracker that replaced this one (hand_over)
        self.said_unrecorded = False  # logged that a request came after the end (_say_unrecorded)
        self.profiling = self.config.sample_rate > 0  # read by every request scope's entry
        # The serving path's one Python frame per request is RequestScope's constructor (see request()).
        self.request = functools.partial(RequestScope, self)  # type: ignore[method-assign]
        self._install()

    # --- process lifecycle (process_lifecycle.py calls these) -----------------------------------------

    def after_fork_in_child(self) -> None:
        """In a forked child: this tracker is the parent's. Its threads (the SDK's, the exporter's) did not come
        along, what it holds (queued and waiting records) is the parent's to export, and a lock the parent's
        thread held at the fork stays held. It stops draining and exporting here: the requests it scopes are
        dropped and counted until the child calls ``instrument()``, which it then hands them to
        (:func:`~inferensics.collector.host.process_lifecycle.replace_active`). Runs between fork and the child's
        first line: no lock is taken, nothing is logged."""
        self._forked = True
        journal, self.journal = self.journal, None
        self.pipeline.journal = None
        if journal is not None:
            journal.forget_in_child()
        for dead in self.dead_journals:  # the parent's to settle: a child's copy would keep them locked
            dead.forget_in_child()
        self.dead_journals = []
        self.queue.items.clear()
        self.queue.capacity = 0  # RequestScope.__exit__ counts what it then turns away (dropped_request)
        pipeline = self.pipeline
        pipeline.waiting.clear()
        pipeline.pending.clear()
        pipeline.unmarked = []
        pipeline._lock = threading.Lock()
        self._guard_lock = threading.Lock()

    def hand_over(self, successor: Tracker) -> None:
        """Send what this replaced tracker's request scopes record to ``successor``, the process's tracker now.

        A server that calls ``instrument()`` once per model, or a forked worker that makes its own tracker and
        still serves through the parent's tracker object, scopes requests with a tracker nothing drains any more:
        their records go through the successor's pipeline (its compile state classifies them) and exporter."""
        late = self.queue.drain() if self.queue is not successor.queue else []
        self.queue, self.pipeline, self.exporter = successor.queue, successor.pipeline, successor.exporter
        self.counters_local = successor.counters_local
        self.journal = successor.journal  # its scopes' requests are the successor's to deliver, and to journal
        self.successor = successor
        for kind, item in late:
            successor.queue.put(kind, item)

    # --- hooks ---------------------------------------------------------------------------------------

    def _install(self) -> None:
        caps = self.capabilities
        if self.config.trace_compiles and caps["trace_logger"].available:
            self._sink = TraceSink(self.queue)
            torch_adapter.add_trace_handler(self._sink)
            # Into the process's TORCH_TRACE log, when one is written: import-trace then skips what is recorded.
            marker = {"process": self.process, "host": self.host, "model": self.model}
            torch_adapter.emit_trace_artifact(PROCESS_ARTIFACT, lambda: json.dumps(marker))
        if caps["guard_complete_hook"].available:
            # Dynamo's guard-complete hook is a Python call from C on every compiled frame's call, about as
            # costly in a request as the rest of the SDK's serving path (benchmarks/results/sdk-cpu). While
            # every compile of the process has given a graph of ours, a frame's guard hit is a call of its
            # graph and a miss is a recompile, both seen without it (Pipeline._guard_counts); the hook goes
            # in when a compile ends without one (records.GRAPH_COMPILES), before that frame runs.
            try:
                previous = torch_adapter.get_guard_hook()
            except Exception as exc:
                previous = None
                self.degrade("guard_complete_hook", exc)
            else:
                if previous is not None or self._sink is None:  # another tool's hook, or no compile seen
                    self._count_guards()
                else:
                    self._sink.on_graphless_compile = self._count_guards
        if caps["recompile_user_context"].available:
            try:
                self._unregister_context = torch_adapter.register_recompile_context(user_context)
            except Exception as exc:
                self.degrade("recompile_user_context", exc)

    def _count_guards(self) -> None:
        """Install Dynamo's guard-complete hook (once; chained behind another tool's hook if one is there).

        Requests that entered their scope before it are counted from their graph calls and compiles.
        """
        with self._guard_lock:
            if self._guard_installed or self._closed:
                return
            try:
                self._previous_guard_hook = torch_adapter.set_guard_hook(guard_hook)
                if self._previous_guard_hook is not None:
                    # Another tool's hook was there: chain it (the common case has none and stays lean).
                    torch_adapter.set_guard_hook(chained_guard_hook(self._previous_guard_hook))
                self._guard_installed = True
            except Exception as exc:
                self.degrade("guard_complete_hook", exc)
                return
            self.pipeline.guards_counted_since = time.perf_counter_ns()

    def degrade(self, name: str, exc: BaseException) -> None:
        """Mark a capability unusable at run time and log it once."""
        self.capabilities[name] = torch_adapter.Capability(name, False, f"{type(exc).__name__}: {exc}")
        log.warning("inferensics: %s unavailable (%s); degrading", name, exc)

    # --- public API ----------------------------------------------------------------------------------

    def compile(
        self,
        model_or_fn: Any,
        *,
        name: str = "",
        mode: str | None = None,
        options: dict[str, Any] | None = None,
        dynamic: bool | None = None,
        fullgraph: bool = False,
        bundle: Any = None,
        keyring: Any = None,
        on_bundle_miss: str = "compile",
        compile_budget: Any = None,
        **dynamo_settings: Any,
    ) -> Any:
        """``torch.compile`` through the instrumented Inductor backend, keeping ``mode`` and ``options``.

        Args:
            model_or_fn: The module or function to compile.
            name: The model label of this model's compile, cache and graph-break records (default: the
                tracker's ``model``); a process serving two models compiles each with its own name.
            mode: As ``torch.compile(mode=...)``.
            options: Inductor options, as ``torch.compile(options=...)``.
            dynamic: As ``torch.compile(dynamic=...)``.
            fullgraph: As ``torch.compile(fullgraph=...)``.
            bundle: A release bundle (directory or loaded bundle). It is verified before anything of it
                loads; its recorded compile arguments replace ``mode``/``options``/``dynamic``/``fullgraph``
                (``dynamic=True`` with a bundle built static is logged once and counted as
                ``bundle_dynamic_overridden``), and every compile is a recorded bundle hit or miss (see
                :mod:`inferensics.collector.host.bundle_guard`).
            keyring: The trusted builders' keys (default ``$INFERENSICS_BUNDLE_KEYRING``).
            on_bundle_miss: ``compile`` (within ``compile_budget``), ``eager`` or ``refuse``.
            compile_budget: Compiles / compile-seconds allowed per window outside the bundle.
            **dynamo_settings: Per-model Dynamo settings this torch's ``torch.compile`` takes
                (``recompile_limit=`` since torch 2.13), passed on unchanged.

        Raises:
            ConfigError: a setting this torch's ``torch.compile`` does not take (the message says where
                to set it instead).
            inferensics.bundle.BundleError: the bundle was refused (one line naming the cause).
        """
        accepted = torch_adapter.dynamo_compile_kwargs() - {"name"}
        unknown = sorted(set(dynamo_settings) - accepted)
        if unknown:
            name = unknown[0]
            where = (
                f"set it process-wide with torch._dynamo.config.{name} = ... before compiling"
                if torch_adapter.is_dynamo_setting(name)
                else f"torch._dynamo.config has no setting {name} either: check the name"
            )
            raise ConfigError(
                f"tracker.compile() got {', '.join(unknown)}=, which torch {torch.__version__}'s torch.compile does "
                f"not take: {where}"
            )
        gate = None
        if bundle is not None:
            from inferensics.collector.host.bundle_guard import install_bundle

            guard = install_bundle(self, bundle, keyring=keyring, on_bundle_miss=on_bundle_miss,  # type: ignore[arg-type]
                                   budget=compile_budget, dynamic=dynamic)  # fmt: skip
            args = guard.loaded.compile_args
            mode, options = args.get("mode"), dict(args.get("options") or {})
            dynamic, fullgraph, gate = args.get("dynamic"), bool(args.get("fullgraph")), guard.gate
        origin = CompileOrigin(str(name or self.model), root_locations(model_or_fn))
        # The provenance level is part of the FX-graph cache key: under a bundle the host compiles with the
        # bundle's recorded options only (which carry the level it was built with), or no graph key would hit.
        provenance = self.config.provenance_level if bundle is None else 0
        backend = InductorBackend(mode=mode, options=options, provenance_level=provenance, origin=origin, gate=gate)
        return torch.compile(model_or_fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph, **dynamo_settings)

    def request(
        self,
        request_id: str,
        *,
        model: str = "",
        traffic_class: str = "",
        tenant: str = "",
        shape: str | Sequence[int] | None = None,
        inputs: dict[str, torch.Tensor] | None = None,
    ) -> RequestScope:
        """Scope one request: graphs, guards, compiles and fallbacks inside are attributed to it (the calls its
        context makes: for streams interleaved on one thread, see :class:`RequestScope`).

        (Each tracker replaces this method by ``functools.partial(RequestScope, tracker)``, the same call
        without this frame: see :class:`~inferensics.collector.host.records.RawRequest`.)
        """
        return RequestScope(
            self, request_id, model=model, traffic_class=traffic_class, tenant=tenant, shape=shape, inputs=inputs
        )

    def flush(self) -> None:
        """Process and export everything recorded so far (blocks the caller, not the serving path)."""
        if self._forked and self.successor is None:  # the parent's pipeline: nothing of it runs here
            return
        self.pipeline.flush()

    def shutdown(self) -> None:
        """Flush, remove every hook and stop the background thread. Idempotent.

        Requests that end afterwards are dropped and counted (``dropped_request``), not queued for nobody."""
        self._end(close_journal=True)

    def _end(self, *, close_journal: bool) -> None:
        """:meth:`shutdown`; ``close_journal=False`` (a process about to be killed, process_lifecycle's SIGTERM) keeps
        the crash journal going, so that the requests still in flight when the process ends are recovered as
        error rows by the next tracker, as those of a process that died."""
        if self._closed:
            return
        self._closed = True
        if self._forked:  # the parent's threads and records: only the hooks are this process's to remove
            self._remove_hooks()
            deactivate(self)
            return
        self._remove_hooks()
        self.pipeline.stop()
        # After the exporter stopped and settled what it could (a post still under way settles its rows when it ends):
        # what it did not deliver stays for the next tracker, and nothing it delivers is left in a journal.
        release_dead_journals(self)
        if close_journal:
            journal, self.journal = self.journal, None
            if journal is not None:
                self.pipeline.journal = None
                journal.close()
        queue = self.queue
        queue.capacity = 0
        for kind, _ in queue.drain():  # ended between the last drain and now
            queue.dropped[kind] += 1
        deactivate(self)

    def _remove_hooks(self) -> None:
        if self._sink is not None:
            torch_adapter.remove_trace_handler(self._sink)
        if self._guard_installed:
            try:
                torch_adapter.set_guard_hook(self._previous_guard_hook)
                self._guard_installed = False  # stats() says what the process has
            except Exception as exc:
                self.degrade("guard_complete_hook", exc)
        if self._unregister_context is not None:
            self._unregister_context()

    def stats(self) -> dict[str, int]:
        """Drop and activity counters: queue drops by kind, processed records, errors (every key of
        :data:`~inferensics.collector.host.tracker_stats.ALWAYS_COUNTED` at least)."""
        return collect_stats(
            self,
            trace_sink_errors=self._sink.errors if self._sink is not None else 0,
            guard_hook_installed=self._guard_installed,
        )

    @property
    def last_error(self) -> str:
        """The most recent error the SDK caught, or export refusal, as one line (``""``: none)."""
        health = getattr(self.exporter, "health", None)
        refused = getattr(health, "last_error", "")
        return str(refused or self.pipeline.last_error)

    def capability_report(self) -> dict[str, str]:
        """``name → "ok"`` or the reason a hook is degraded."""
        return {n: ("ok" if c.available else c.reason) for n, c in self.capabilities.items()}


def _describe(exc: BaseException) -> str:
    """``"Type: message"`` of the request's exception; never raises (``__str__`` is user code)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return f"{type(exc).__name__}: <unprintable>"


def _say_unrecorded(tracker: Tracker, request_id: str) -> None:
    """Log once per tracker that it records nothing any more (shut down, or the parent's in a forked child)."""
    if tracker.said_unrecorded:
        return
    tracker.said_unrecorded = True
    where = "the parent's tracker in a forked child" if tracker._forked else "shut down"
    log.warning(
        "inferensics: request %s was scoped with a tracker that records nothing (%s): not recorded, counted in "
        "stats() as dropped_request. Call instrument() in this process (each forked worker makes its own).",
        request_id[:100],
        where,
    )
