"""Test helpers for code that uses the host SDK: an in-memory exporter and a fixed clock, no store needed.

>>> from inferensics.collector.host import instrument
>>> from inferensics.collector.testing import FixedClock, InMemoryExporter
>>> exporter = InMemoryExporter()
>>> with FixedClock(start=1_767_225_600.0, step_ns=2_000_000):
...     tracker = instrument(exporter=exporter, host="h1", model="m")
...     with tracker.request("r1", traffic_class="interactive"):
...         pass
...     tracker.shutdown()
>>> [(r.request_id, r.ts.isoformat(), r.latency_ms) for r in exporter.requests]
[('r1', '2026-01-01T00:00:00+00:00', 2.0)]

Like the rest of the host SDK this module needs only the slim install (torch, pydantic, OpenTelemetry).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType, TracebackType
from typing import Any, Final, Self, TypeVar

from inferensics.schema.events import RequestEvent
from inferensics.schema.table import Event

__all__ = ["Blob", "FixedClock", "InMemoryExporter"]

E = TypeVar("E", bound=Event)


@dataclass(frozen=True, slots=True)
class Blob:
    """One blob handed to :meth:`InMemoryExporter.put_blob`."""

    data: bytes
    kind: str
    attrs: Mapping[str, str]


@dataclass
class InMemoryExporter:
    """An :class:`~inferensics.collector.host.Exporter` that keeps everything it is handed, in order.

    The SDK calls it on its background thread; reads are safe from the test's thread once
    ``tracker.flush()`` or ``tracker.shutdown()`` has returned.
    """

    requests: list[RequestEvent] = field(default_factory=list)
    """Request records, in the order they were exported."""
    children: dict[str, list[Event]] = field(default_factory=dict)
    """Sub-records (recompiles, graph breaks, cache lookups, kernel timings) by request id."""
    records: list[Event] = field(default_factory=list)
    """Records that belong to no request (compiles, kernel inventory, orphan sub-records)."""
    blobs: dict[str, Blob] = field(default_factory=dict)
    """Blobs by sha256."""
    flushes: int = 0
    shut_down: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        """Keep one request record and its sub-records."""
        with self._lock:
            self.requests.append(request)
            self.children.setdefault(request.request_id, []).extend(children)

    def export_records(self, records: Sequence[Event]) -> None:
        """Keep records that belong to no request span."""
        with self._lock:
            self.records.extend(records)

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """Keep a blob under its sha256 and return the digest."""
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            self.blobs[digest] = Blob(bytes(data), kind, dict(attrs))
        return digest

    def flush(self) -> None:
        """Count the flush (nothing is buffered)."""
        self.flushes += 1

    def shutdown(self) -> None:
        """Note the shutdown."""
        self.shut_down = True

    def events(self, model: type[E]) -> list[E]:
        """Every exported record of one event model (``CompileEvent``, ``RecompileEvent``...), in order."""
        with self._lock:
            pool: list[Event] = [*self.requests, *(c for cs in self.children.values() for c in cs), *self.records]
        return [e for e in pool if isinstance(e, model)]

    def request(self, request_id: str) -> RequestEvent:
        """The request record with ``request_id``.

        Raises:
            KeyError: no such request was exported (yet: flush the tracker first).
        """
        with self._lock:
            for r in self.requests:
                if r.request_id == request_id:
                    return r
        raise KeyError(f"no request {request_id!r} exported; flush the tracker first")

    def clear(self) -> None:
        """Forget everything kept so far."""
        with self._lock:
            self.requests.clear()
            self.children.clear()
            self.records.clear()
            self.blobs.clear()
            self.flushes = 0


_CLOCK_READERS: Final = ("inferensics.collector.host.records", "inferensics.collector.host.request_tracker")
"""The host SDK modules whose clock reads become records' fields: a request's ``ts`` (wall clock, read as
its record is made) and its latency (``perf_counter_ns``, on entering and leaving its scope). Per-graph
timings are read in the compiled wrapper's hot loop from a clock bound when the graph is compiled and stay
real."""


class _ClockModule(ModuleType):
    """Stands in for ``time`` in the clock readers: the clock's reads, everything else from ``time``."""

    def __init__(self, clock: FixedClock) -> None:
        super().__init__("time")
        self._clock = clock

    def time(self) -> float:
        return self._clock.time()

    def time_ns(self) -> int:
        return self._clock.time_ns()

    def perf_counter_ns(self) -> int:
        return self._clock.perf_counter_ns()

    def monotonic(self) -> float:
        return self._clock.monotonic()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class FixedClock:
    """A clock that starts at ``start`` (seconds since the epoch) and advances ``step_ns`` on every read.

    As a context manager it stands in for the wall and monotonic clocks the host SDK stamps request records
    with, so ``ts`` and ``latency_ms`` of exported records compare exactly: a request's wall time is the
    clock's current time and its latency one step (its scope reads the clock on entry and on exit).
    """

    def __init__(self, start: float = 1_767_225_600.0, step_ns: int = 1_000_000) -> None:
        if step_ns < 0:
            raise ValueError(f"step_ns must be >= 0, got {step_ns}")
        self._now_ns = round(start * 1e9)
        self.step_ns = step_ns
        self._lock = threading.Lock()
        self._saved: list[tuple[ModuleType, Any]] = []

    def _tick(self) -> int:
        with self._lock:
            now = self._now_ns
            self._now_ns += self.step_ns
            return now

    def time_ns(self) -> int:
        """Nanoseconds since the epoch, then advance."""
        return self._tick()

    def time(self) -> float:
        """Seconds since the epoch, then advance."""
        return self._tick() / 1e9

    def perf_counter_ns(self) -> int:
        """The same reading as :meth:`time_ns` (one clock, so intervals are whole steps)."""
        return self._tick()

    def monotonic(self) -> float:
        """The same reading as :meth:`time`."""
        return self._tick() / 1e9

    def __enter__(self) -> Self:
        import importlib

        shim = _ClockModule(self)
        for name in _CLOCK_READERS:
            module = importlib.import_module(name)
            self._saved.append((module, module.time))
            setattr(module, "time", shim)  # noqa: B010 - the module's own `time` global
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        while self._saved:
            module, original = self._saved.pop()
            setattr(module, "time", original)  # noqa: B010
