"""A loaded bundle at work: match every compile against the bundle's graphs, apply the miss policy and the
compile budget, and keep the hits and misses.

A compile whose graph signature the bundle holds goes ahead and must hit the FX-graph cache the bundle
filled (a **bundle hit**; a cache miss there is still a bundle miss). A graph the bundle does not hold is a
**bundle miss**, named with the factors that differ from the bundle (the input shapes, settings, compiler
versions, customisations), and handled by ``on_bundle_miss``: ``compile`` (within the compile budget; past
it the graph runs eagerly and the miss says why), ``eager``, or ``refuse`` (calls raise
:class:`BundleMissRefusedError`).

A hit on a graph with symbolic sizes serves every size its guards admit, while the bundle qualified it only at
the sizes its build ran (:attr:`~inferensics.bundle.manifest.GraphRecord.qualified_shapes`). Each call at other
sizes is an :class:`UnqualifiedShape`: counted by shape (:meth:`BundleSession.stats`) and handed to
``on_unqualified_shape`` (the host SDK marks the request with it), so that a request served at a shape the bundle
never qualified says so at serve time, not only when replay names it ``shape_specialization``.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

import torch

from inferensics.bundle import factors, torch_adapter
from inferensics.bundle.capture import (
    GraphCapture,
    RecordingBackend,
    call_shape,
    dynamic_positions,
    fill_from_trace,
    new_capture,
)
from inferensics.bundle.shape_factor import accepted_shapes_factor

if TYPE_CHECKING:
    from inferensics.bundle.load import LoadedBundle

MissPolicy = Literal["compile", "eager", "refuse"]
MISS_POLICIES: Final = ("compile", "eager", "refuse")


CODE_CHANGED: Final = "code: the bundle holds another graph for these inputs (the model's code changed since the build)"
"""The miss factor of a graph whose inputs the bundle qualified but which traced to another graph: replay refuses to
record such a replay as the request's verdict (it is not of what served)."""


REGISTRY_DIFFERS: Final = "kernel_registry: kernel registry state differs: "
"""Opens the miss factor of a host whose kernel registry (ops, providers, selection policy, applied evidence) is not
the one the bundle was built with, followed by where it differs."""


class BundleMissRefusedError(RuntimeError):
    """A call reached a graph the bundle does not hold, under ``on_bundle_miss="refuse"``."""


@dataclass
class CompileBudget:
    """At most ``max_compiles`` compiles and ``max_seconds`` compile seconds per ``window_s`` seconds.

    ``clock`` is injectable (tests).
    """

    max_compiles: int = 4
    max_seconds: float = 60.0
    window_s: float = 600.0
    clock: Callable[[], float] = time.monotonic
    spent: deque[tuple[float, float]] = field(default_factory=deque)

    def _trim(self) -> None:
        now = self.clock()
        while self.spent and now - self.spent[0][0] >= self.window_s:
            self.spent.popleft()

    def refusal(self) -> str:
        """Why another compile is not allowed now (``""`` when it is)."""
        self._trim()
        n, secs = len(self.spent), sum(s for _, s in self.spent)
        if n >= self.max_compiles:
            return f"compile budget spent: {n} of {self.max_compiles} compiles in {self.window_s:g} s"
        if secs >= self.max_seconds:
            return f"compile budget spent: {secs:.1f} of {self.max_seconds:g} compile-seconds in {self.window_s:g} s"
        return ""

    def charge(self, seconds: float) -> None:
        """Count one compile of ``seconds``."""
        self.spent.append((self.clock(), seconds))


@dataclass(frozen=True)
class BundleMatch:
    """What happened to one graph under the bundle."""

    status: Literal["hit", "miss"]
    action: Literal["compiled", "eager", "refused"]
    signature: str
    fx_key: str
    inputs: str
    factors: tuple[str, ...] = ()
    """``group.factor: bundle → here`` for each differing factor (misses)."""
    reason: str = ""
    compile_s: float = 0.0


@dataclass(frozen=True)
class UnqualifiedShape:
    """One call that a bundle hit served at sizes the bundle never qualified for its graph."""

    signature: str
    """The graph's signature."""
    fx_key: str
    """The graph's FX-graph-cache key (the bundle's artifact that served)."""
    shape: str
    """The call's sizes where the graph's are symbolic (``[5,8]``; ``;`` between inputs)."""
    qualified: tuple[str, ...]
    """The sizes the bundle qualified the graph at."""


class BundleSession:
    """Gate compiles through a loaded bundle.

    Args:
        bundle: The loaded bundle.
        on_bundle_miss: ``compile``, ``eager`` or ``refuse``.
        budget: Compile budget for misses under ``compile``.
        listener: Called with each :class:`BundleMatch` (the host SDK records them).
        on_unqualified_shape: Called (on the serving thread, inside the call) with each :class:`UnqualifiedShape`
            (the host SDK marks the request being served).
    """

    def __init__(
        self,
        bundle: LoadedBundle,
        *,
        on_bundle_miss: MissPolicy = "compile",
        budget: CompileBudget | None = None,
        listener: Callable[[BundleMatch], None] | None = None,
        on_unqualified_shape: Callable[[UnqualifiedShape], None] | None = None,
    ) -> None:
        if on_bundle_miss not in MISS_POLICIES:
            raise ValueError(f"on_bundle_miss must be one of {MISS_POLICIES}, not {on_bundle_miss!r}")
        self.bundle = bundle
        self.on_bundle_miss = on_bundle_miss
        self.budget = budget or CompileBudget()
        self.listener = listener
        self.matches: list[BundleMatch] = []
        self._lock = threading.Lock()
        self._by_signature = {g.signature: g for g in bundle.manifest.graphs}
        self._keys = {g.fx_key for g in bundle.manifest.graphs}
        self._differing: list[str] | None = None
        self.on_unqualified_shape = on_unqualified_shape
        self.unqualified_shapes: Counter[str] = Counter()
        """Calls served by a bundle hit at sizes the bundle never qualified, by shape."""
        # Graphs with symbolic sizes whose qualified sizes the bundle records (older bundles record none).
        self._qualified = {
            g.signature: (positions, frozenset(g.qualified_shapes))
            for g in bundle.manifest.graphs
            if g.qualified_shapes and (positions := dynamic_positions(g.inputs))
        }

    # --- the gate ------------------------------------------------------------------------------------

    def decide(self, g: GraphCapture, gm: Any) -> tuple[Callable[..., Any] | None, BundleMatch | None]:
        """Before compiling: ``(None, None)`` to compile (a hit, or a miss allowed to compile), or the callable
        that serves the graph instead and the miss it records."""
        if g.signature in self._by_signature:
            return None, None
        factors_ = self.miss_factors(g)
        if self.on_bundle_miss == "refuse":
            match = BundleMatch("miss", "refused", g.signature, "", g.inputs, factors_, "on_bundle_miss=refuse")
            return _refusing(match), match
        if self.on_bundle_miss == "eager":
            return gm, BundleMatch("miss", "eager", g.signature, "", g.inputs, factors_, "on_bundle_miss=eager")
        refusal = self.budget.refusal()
        if refusal:
            return gm, BundleMatch("miss", "eager", g.signature, "", g.inputs, factors_, refusal)
        return None, None

    def compiled(self, g: GraphCapture) -> BundleMatch:
        """After a compile the gate allowed: the hit, or the miss it was."""
        if g.signature in self._by_signature:
            expected = self._by_signature[g.signature].fx_key
            if g.fx_key == expected and g.fx_status == "hit":
                return BundleMatch("hit", "compiled", g.signature, g.fx_key, g.inputs, compile_s=g.compile_s)
            why = (
                f"artifacts.fx_key: {expected[:16]} → {g.fx_key[:16]}"
                if g.fx_key != expected
                else f"artifacts.cache: FX-graph cache {g.fx_status or 'not consulted'} for {expected[:16]}"
            )
            return BundleMatch("miss", "compiled", g.signature, g.fx_key, g.inputs, (why, *self.process_factors()),
                               "the bundle's graph did not come from its cache", g.compile_s)  # fmt: skip
        self.budget.charge(g.compile_s)
        return BundleMatch("miss", "compiled", g.signature, g.fx_key, g.inputs, self.miss_factors(g),
                           "on_bundle_miss=compile", g.compile_s)  # fmt: skip

    def record(self, match: BundleMatch) -> None:
        """Keep a match and tell the listener (never raises into the compile)."""
        with self._lock:
            self.matches.append(match)
        if self.listener is not None:
            with contextlib.suppress(Exception):
                self.listener(match)

    def serve_graph(
        self, gm: Any, example_inputs: list[Any], compile_graph: Callable[[], Callable[..., Any]]
    ) -> tuple[Callable[..., Any], BundleMatch]:
        """For a backend of its own (the host SDK's): decide, compile through ``compile_graph`` when allowed,
        record the match, and return what serves the graph with the match."""
        g = new_capture(gm, example_inputs)
        replacement, match = self.decide(g, gm)
        if replacement is not None and match is not None:
            self.record(match)
            return replacement, match
        t0 = time.perf_counter()
        with torch_adapter.capture_compiles() as cap:
            compiled = compile_graph()
        g.compile_s = time.perf_counter() - t0
        fill_from_trace(g, cap.events)
        match = self.compiled(g)
        self.record(match)
        return self.watch(match, compiled), match

    def watch(self, match: BundleMatch, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """What serves a compiled graph: ``compiled`` itself, or, for a hit on a graph with symbolic sizes, a
        wrapper that checks each call's sizes against those the bundle qualified (:class:`UnqualifiedShape`)."""
        qualified = self._qualified.get(match.signature) if match.status == "hit" else None
        if qualified is None:
            return compiled
        positions, shapes = qualified
        session = self

        def serve(*args: Any) -> Any:
            shape = call_shape(args, positions)
            if shape not in shapes:
                session.served_unqualified(match, shape, shapes)
            return compiled(*args)

        return serve

    def served_unqualified(self, match: BundleMatch, shape: str, qualified: frozenset[str]) -> None:
        """Count a call ``match``'s graph served at ``shape``, outside its ``qualified`` sizes, and tell
        ``on_unqualified_shape`` (never raises into the call)."""
        with self._lock:
            self.unqualified_shapes[shape] += 1
        if self.on_unqualified_shape is not None:
            served = UnqualifiedShape(match.signature, match.fx_key, shape, tuple(sorted(qualified)))
            with contextlib.suppress(Exception):
                self.on_unqualified_shape(served)

    def stats(self) -> dict[str, Any]:
        """Graph hits and misses so far, and the calls bundle hits served at sizes the bundle never qualified
        (``unqualified_shape_calls``, and by shape in ``unqualified_shapes``)."""
        with self._lock:
            unqualified = dict(self.unqualified_shapes)
        return {
            "bundle_hit_graphs": self.hits,
            "bundle_miss_graphs": self.misses,
            "unqualified_shape_calls": sum(unqualified.values()),
            "unqualified_shapes": unqualified,
        }

    # --- the factors of a miss -----------------------------------------------------------------------

    def miss_factors(self, g: GraphCapture) -> tuple[str, ...]:
        """The factors that differ between the bundle and this graph: its inputs against the qualified
        graphs', and this process's settings, compiler versions, customisations and target."""
        out: list[str] = []
        kinds = input_kinds(g.inputs)
        same_inputs = [r for r in self._by_signature.values() if r.inputs == g.inputs]
        same_code = [
            r
            for r in self._by_signature.values()
            if (g.graph_code and r.graph_code == g.graph_code) or input_kinds(r.inputs) == kinds
        ]
        if g.graph_code and same_inputs and all(r.graph_code and r.graph_code != g.graph_code for r in same_inputs):
            # Inputs the bundle qualified, traced to another graph: the shapes are not what differs.
            out.append(CODE_CHANGED)
        elif same_code:
            static = self.bundle.compile_args.get("dynamic") is False  # built without --dynamic: advise it
            qualified = [r.inputs for r in same_code]
            out.append(accepted_shapes_factor(g.inputs, qualified, sources=g.sources, static=static))
        elif not self._by_signature:
            # A bundle signed before `bundle build` refused graphs it could not carry (an FX pass without uuid()
            # made Inductor bypass its cache): the same model and code path miss, whatever they are.
            out.append(
                f"code: the bundle holds no compiled graph at all (it was signed without one), inputs {g.inputs}: "
                "rebuild it with this release's `inferensics bundle build`, which names why a graph cannot be carried"
            )
        else:
            out.append(f"code: a graph the bundle does not hold (another model or code path), inputs {g.inputs}")
        out.extend(self.process_factors())
        return tuple(out)

    def process_factors(self) -> list[str]:
        """Settings, compiler versions, customisations, compatibility and the kernel registry's state that differ
        here (computed once)."""
        if self._differing is None:
            ident = self.bundle.manifest.identity
            diffs: list[str] = []
            changed_here, _ = torch_adapter.compiler_settings()
            built = ident.get("settings", {}).get("changed", {})
            # This runs inside the compile, which set what the bundle's own dynamic= sets: not a difference.
            patched = torch_adapter.dynamic_patches(ident.get("settings", {}).get("compile", {}).get("dynamic"))
            for k in sorted(set(built) | set(changed_here)):
                if k in patched and k not in built and changed_here.get(k) == patched[k]:
                    continue
                if built.get(k) != changed_here.get(k):
                    diffs.append(f"settings.{k}: {built.get(k)!r} → {changed_here.get(k)!r}")
            threads = ident.get("settings", {}).get("cpu_threads")
            if threads is not None and threads != torch.get_num_threads():
                diffs.append(f"settings.cpu_threads: {threads!r} → {torch.get_num_threads()!r}")
            versions = factors.compiler_versions()
            for k, v in ident.get("compiler_versions", {}).items():
                if versions.get(k) != v:
                    diffs.append(f"compiler_versions.{k}: {str(v)[:16]!r} → {str(versions.get(k))[:16]!r}")
            here = factors.compatibility(str(ident.get("compatibility", {}).get("device_type", "cpu")))
            for k, v in ident.get("compatibility", {}).items():
                if here.get(k) != v:
                    diffs.append(f"compatibility.{k}: {v!r} → {here.get(k)!r}")
            installed = torch_adapter.inductor_decompositions()
            for c in ident.get("customisations", []):
                if c["kind"] == "decomposition":
                    fn = installed.get(c["target"])
                    path = f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', '')}" if fn else "none"
                    if path != c["import_path"]:
                        diffs.append(f"customisations.{c['target']}: {c['import_path']} → {path}")
            registry = factors.registry_differences(ident.get("kernel_registry", {}), factors.kernel_registry())
            if registry:  # its graphs' registry ops may compile with other providers here (another cache key)
                diffs.append(f"{REGISTRY_DIFFERS}{'; '.join(registry)}")
            self._differing = diffs
        return list(self._differing)

    # --- compile ---------------------------------------------------------------------------------------

    def backend(self) -> RecordingBackend:
        """A Dynamo backend that compiles with the bundle's options through this session's gate."""
        backend = RecordingBackend(config_patches=self.bundle.config_patches)
        session = self

        def gate(g: GraphCapture, gm: Any) -> Callable[..., Any] | None:
            replacement, match = session.decide(g, gm)
            if match is not None:
                session.record(match)
            return replacement

        def compiled(g: GraphCapture, fn: Callable[..., Any]) -> Callable[..., Any]:
            match = session.compiled(g)
            session.record(match)
            return session.watch(match, fn)

        backend.gate = gate
        backend.on_compiled = compiled
        return backend

    @property
    def hits(self) -> int:
        """Bundle hits so far."""
        return sum(m.status == "hit" for m in self.matches)

    @property
    def misses(self) -> int:
        """Bundle misses so far."""
        return sum(m.status == "miss" for m in self.matches)


_SIZES = re.compile(r"\[([^\]]*)\]/[^@;]*@")
_SYMBOL = re.compile(r"sym:[^;]*")


def input_kinds(inputs: str) -> str:
    """Input metadata without sizes and strides (``sym:s0;int64[s0,5]/5,1@cpu`` → ``sym;int64[2]@cpu``): two graphs with
    the same kinds of inputs differ in shapes, not in what they compute from."""
    ranks = _SIZES.sub(lambda m: f"[{m.group(1).count(',') + 1 if m.group(1) else 0}]@", inputs)
    return _SYMBOL.sub("sym", ranks)


def _refusing(match: BundleMatch) -> Callable[..., Any]:
    message = f"bundle miss refused (on_bundle_miss=refuse): inputs {match.inputs}; differing: " + "; ".join(
        match.factors[:3]
    )

    def refuse(*args: Any) -> Any:
        raise BundleMissRefusedError(message)

    return refuse
