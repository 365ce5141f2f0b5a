"""Hot-path state: the in-flight request record and the compiled-graph slots.

Import-light on purpose (stdlib and the schema's attribute names only): the per-call hooks touch nothing else, so
the serving path on a bare GPU host needs no OpenTelemetry. Everything heavier happens on the SDK's
background thread.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Final

# The request attributes bundle_guard sets are the schema's (the drill-down reads them under the same names); the
# pipeline and bundle_guard import them from here.
from inferensics.schema.request_attrs import BUNDLE_UNQUALIFIED_CALLS, BUNDLE_UNQUALIFIED_SHAPE


class GraphSlot:
    """One compiled graph handed back to Dynamo by the backend (process-local, indexed)."""

    __slots__ = ("compile_id", "index")

    def __init__(self, index: int, compile_id: str) -> None:
        self.index = index
        self.compile_id = compile_id


class CompileOrigin:
    """Who asked for a compile: the model label given to ``tracker.compile`` and, for a model whose
    ``forward`` is wrapped by a decorator (Hugging Face's), where its own ``forward`` is.

    Attributes:
        model: The model label of every compile record made through that ``tracker.compile`` call.
        root_locations: The decorator's code object → ``file:line:name`` of the model's own ``forward``
            (the compiled frame is the decorator's wrapper, shared by every model class it decorates).
    """

    __slots__ = ("model", "root_locations")

    def __init__(self, model: str, root_locations: dict[Any, str] | None = None) -> None:
        self.model = model
        self.root_locations = root_locations or {}


GRAPH_COMPILES: set[str] = set()
"""Compile ids (``0/1``) of the compiles in progress for which a tracker's backend compiled a graph: the
trace sink reads and clears each one when its compile ends. A compile of ours without one (a frame that broke
before any op, a compile at the recompile limit, a failed compile) leaves a frame that can later hit or miss
its guards without calling a graph of ours, which only Dynamo's guard-complete hook sees: the tracker
installs that hook then (``Tracker._count_guards``). Frames compiled by other backends (a plain
``torch.compile`` elsewhere in the process) are not the tracker's: their guards count in no request until
the hook is in for a frame of ours."""

REQUEST_UNQUALIFIED_SHAPES: Final = 8
"""Unqualified shapes stored on one request; calls at further shapes are counted, not named."""

ORIGIN_ATTR = "inferensics_origin"
"""The attribute of a compile backend that carries its :class:`CompileOrigin` (looked up by the trace sink)."""


class RawRequest:
    """What the hooks learn about one request while it runs; converted to a record in the background.

    Built on the serving thread by ``tracker.request(...)`` (its constructor is that call's only Python
    frame: between two model runs every Python call on the serving path is cold and costs about a
    microsecond, see ``benchmarks/results/sdk-cpu/README.md``). What can wait is left as the caller gave it:
    the background thread turns ``shape`` into its signature and non-string labels into strings.
    """

    __slots__ = (
        "_jslot",
        "_profile",
        "_t0",
        "_token",
        "_tracker",
        "bundle_status",
        "bundle_unqualified",
        "compile_ids",
        "compile_ns",
        "cpu_output",
        "error",
        "fingerprint",
        "fp_rate",
        "fp_status",
        "graph0",
        "graph0_calls",
        "graph0_ns",
        "graphs",
        "guard_hits",
        "guard_misses",
        "input_digest",
        "inputs",
        "latency_ns",
        "model",
        "profile",
        "request_id",
        "rid_bytes",
        "sampled",
        "shape",
        "tenant",
        "traffic_class",
        "ts",
    )

    def __init__(
        self,
        tracker: Any,
        request_id: str,
        *,
        model: str = "",
        traffic_class: str = "",
        tenant: str = "",
        shape: str | Sequence[int] | None = None,
        inputs: Any = None,
    ) -> None:
        if request_id.__class__ is not str:  # the sampling rules hash it here; a label must be a string
            request_id = str(request_id)
        if shape is not None and not isinstance(shape, (tuple, str)):
            shape = frozen_shape(shape)  # a list (or any iterable) is read now: the caller may change it
        self._tracker = tracker  # the Tracker (its queue, rules and counters), or None outside one
        self._token: Any = None
        self._jslot = 0  # offset of the request's slot in the crash journal (0: none)
        self.rid_bytes = b""  # the id's UTF-8 bytes once the crash journal has written them
        self._profile: Any = None
        self._t0 = 0
        self.request_id = request_id
        self.model = model  # "" : the label of the graph that serves the request, or the tracker's (pipeline)
        self.traffic_class = traffic_class
        self.tenant = tenant
        self.shape = shape
        self.ts = time.time()
        self.latency_ns = 0
        # The first graph a request calls is counted in the request's own slots (nearly every request calls
        # one graph): the per-call path then writes only this object, next to the guard hook's counts
        # (slots are laid out by name), not a dict and a list besides. Further graphs go into ``graphs``.
        self.graph0: GraphSlot | None = None
        self.graph0_calls = 0
        self.graph0_ns = 0
        self.graphs: dict[GraphSlot, list[int]] = {}
        self.guard_hits = 0
        self.guard_misses = 0
        self.compile_ids: tuple[str, ...] = ()  # a tuple: no GC-tracked list per request (compiles are rare)
        self.compile_ns = 0
        self.error = ""
        self.fingerprint: Any = None
        self.fp_rate = 0.0  # the sampling rate set_output applied, as recorded (0: no output given)
        self.fp_status = ""  # set by set_output when it took no fingerprint: unsampled, failed
        self.cpu_output = False  # set_output was given a CPU tensor (the background thread's GIL pacing)
        self.input_digest: Any = None
        self.inputs = inputs
        self.sampled = False  # chosen for the profiler (decided on entering the scope)
        self.profile: Any = None
        self.bundle_status = ""  # "hit" / "miss" under a release bundle (bundle_guard)
        # "" until a bundle hit serves it at sizes never qualified: then an UnqualifiedCalls (bundle_guard)
        self.bundle_unqualified: Any = ""

    def count_call(self, slot: GraphSlot) -> bool:
        """Count one call of ``slot``; whether to time it (see :data:`TIMED_FIRST`): then :meth:`add_ns`."""
        if self.graph0 is slot:
            n = self.graph0_calls
            self.graph0_calls = n + 1
        elif self.graph0 is None:
            self.graph0, self.graph0_calls = slot, 1
            return True
        else:
            entry = self.graphs.get(slot)
            if entry is None:
                self.graphs[slot] = [1, 0]
                return True
            n = entry[0]
            entry[0] = n + 1
        return n < TIMED_FIRST or not n & TIMED_MASK

    def add_ns(self, slot: GraphSlot, ns: int) -> None:
        """Add ``ns`` nanoseconds of host wall time of a timed call of ``slot`` (counted before)."""
        if self.graph0 is slot:
            self.graph0_ns += ns
        else:
            self.graphs[slot][1] += ns

    def graph_counts(self) -> dict[GraphSlot, list[int]]:
        """``{slot: [calls, host ns]}`` of every graph the request called, in the order of their first calls;
        the host time of the timed calls scaled to all calls (:func:`timed_calls`)."""
        first = self.graph0
        pairs = [(first, self.graph0_calls, self.graph0_ns)] if first is not None else []
        pairs.extend((slot, calls, ns) for slot, (calls, ns) in self.graphs.items())
        return {slot: [calls, ns * calls // timed_calls(calls)] for slot, calls, ns in pairs}


TIMED_FIRST = 4
"""A graph's first calls in a request that are all timed; after them one call in :data:`TIMED_EVERY`."""
TIMED_EVERY = 16
"""After the first :data:`TIMED_FIRST` calls of a graph in a request, calls ``n`` with ``n % TIMED_EVERY == 0``
(counting from 0) are timed and the others only counted: two clock reads on every call were most of the
per-call cost inside a request (benchmarks/results/sdk-h200/README.md). A power of two."""
TIMED_MASK = TIMED_EVERY - 1


class UnqualifiedCalls:
    """A request's calls that a bundle hit served at sizes the bundle never qualified (``bundle_guard`` fills it on
    the serving thread, inside such a call; the pipeline reads :meth:`attrs`)."""

    __slots__ = ("calls", "more", "shapes")

    def __init__(self) -> None:
        self.calls = 0
        self.shapes: list[str] = []  # in the order of their first call, at most REQUEST_UNQUALIFIED_SHAPES
        self.more = 0  # calls at further shapes, not stored (a decode loop can grow its sizes at every call)

    def add(self, shape: str) -> None:
        """Count one call at ``shape``."""
        self.calls += 1
        shapes = self.shapes
        if shape not in shapes:
            if len(shapes) < REQUEST_UNQUALIFIED_SHAPES:
                shapes.append(shape)
            else:
                self.more += 1

    def attrs(self) -> dict[str, str]:
        """The request's attributes: :data:`BUNDLE_UNQUALIFIED_SHAPE` and :data:`BUNDLE_UNQUALIFIED_CALLS`."""
        shapes = ", ".join(self.shapes) + (f" (+{self.more} calls at other shapes)" if self.more else "")
        return {BUNDLE_UNQUALIFIED_SHAPE: shapes, BUNDLE_UNQUALIFIED_CALLS: str(self.calls)}


def frozen_shape(shape: Any) -> Any:
    """A shape given as a list or other iterable, as a tuple; anything else as it is (the background thread
    then fails to sign it and counts a ``shape_errors``: the request still counts, with no shape)."""
    try:
        return tuple(shape)
    except Exception:
        return shape


def timed_calls(calls: int) -> int:
    """How many of a graph's first ``calls`` calls in one request were timed."""
    if calls <= TIMED_FIRST:
        return calls
    return TIMED_FIRST + (calls - 1) // TIMED_EVERY


CURRENT: ContextVar[RawRequest | None] = ContextVar("inferensics_request", default=None)
"""The request the running code serves (``None`` outside ``tracker.request(...)``)."""
