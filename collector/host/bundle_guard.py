"""Release bundles on a serving host: load (verify first), gate every compile, record hits and misses.

``tracker.compile(model, bundle=DIR)`` verifies the bundle (signature, trusted builder, per-file hashes,
revoked or quarantined, compatibility key, customisations) before anything of it loads, installs it, and
compiles with the bundle's recorded options through a gate: a graph the bundle holds must come from its
cache (a bundle hit); any other graph is a bundle miss, recorded as a ``bundle_misses`` row naming the
differing factors, and handled by ``on_bundle_miss`` (``compile`` within the compile budget, ``eager``,
``refuse``). Each request's ``attrs['bundle_status']`` says ``hit`` (every graph that served it came from
the bundle) or ``miss``. A hit on a graph with symbolic sizes that serves a call at sizes the bundle never
qualified it at is counted (``stats()['bundle_unqualified_shape_calls']``), puts those sizes on the request
(``attrs['bundle_unqualified_shape']``: the graph's dynamic sizes, one list per input with a symbol, as the call bound
them, after any padding the model does, so not the request's input shape: ``[4,128]`` for a request of ``4x120``;
each shape once, ``[5,8], [7,8]``, up to
:data:`~inferensics.collector.host.records.REQUEST_UNQUALIFIED_SHAPES`; ``attrs['bundle_unqualified_calls']``: the
request's calls at them) and is logged once per shape. The registration
(``bundles`` row) records the signer and ``signature_state``; a refused bundle is registered with the
refusal cause, then the refusal is raised. The bundle's recorded compile options win over the caller's:
``tracker.compile(dynamic=True)`` with a bundle built static is logged once and counted
(``stats()['bundle_dynamic_overridden']``). A miss on the graph's inputs logs which differ and how to cover them
(``--dynamic`` too, for a static bundle that missed on sizes alone). A bundle that carries kernel qualification
evidence makes the kernel registry follow it on load: ``stats()`` counts the policy entries applied
(``kernel_evidence_applied``) and refused (``kernel_evidence_refused``: measured on another device, or a
provider this process lacks), and a refusal is logged once with why.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from inferensics.bundle import (
    BundleError,
    BundleMatch,
    BundleStates,
    CompileBudget,
    Keyring,
    LoadedBundle,
    UnqualifiedShape,
    load,
)
from inferensics.bundle.canonical import sha256_file
from inferensics.bundle.manifest import MANIFEST_FILE, read_manifest_unverified
from inferensics.bundle.session import BundleSession, MissPolicy
from inferensics.bundle.shape_factor import STATIC_ADVICE
from inferensics.bundle.shapes import qualified_text
from inferensics.collector.host.records import CURRENT, UnqualifiedCalls
from inferensics.collector.host.shape_policy import shape_signature
from inferensics.schema.events import BundleEvent, BundleMissEvent
from inferensics.schema.request_attrs import BUNDLE_UNQUALIFIED_SHAPE
from inferensics.schema.shape_text import INPUT_SEPARATOR, graph_size_text

if TYPE_CHECKING:
    from inferensics.collector.host.request_tracker import Tracker

log = logging.getLogger("inferensics.collector.host")

LOGGED_SHAPES_LIMIT: Final = 64
"""Unqualified shapes logged per bundle: one line each, then only counted (a host serving every size is not
flooded)."""


class BundleGuard:
    """One loaded bundle gating one tracker's compiles."""

    def __init__(
        self,
        tracker: Tracker,
        loaded: LoadedBundle,
        *,
        on_bundle_miss: MissPolicy = "compile",
        budget: CompileBudget | None = None,
    ) -> None:
        self.tracker = tracker
        self.loaded = loaded
        self.session: BundleSession = loaded.session(
            on_bundle_miss=on_bundle_miss, budget=budget, listener=self._on, on_unqualified_shape=self._unqualified
        )
        self._logged_reasons: set[str] = set()
        self._logged_shapes: set[str] = set()
        self._shapes_lock = threading.Lock()  # serving threads count concurrently (only at unqualified sizes)

    def gate(self, gm: Any, example_inputs: list[Any], compile_graph: Callable[[], Any]) -> Callable[..., Any]:
        """The backend's compile step under the bundle."""
        served, match = self.session.serve_graph(gm, example_inputs, compile_graph)
        return _marking(served, match.status)

    def _on(self, match: BundleMatch) -> None:
        t = self.tracker
        t.counters_local["bundle_miss_graphs" if match.status == "miss" else "bundle_hit_graphs"] += 1
        if match.status == "hit":
            return
        t.counters_local[f"bundle_miss_{match.action}"] += 1
        if match.reason not in self._logged_reasons:  # once per reason: a host that drifted from its bundle says so
            self._logged_reasons.add(match.reason)
            log.warning(
                "inferensics: a graph of bundle %s's model is not in the bundle (%s): %s; counted in stats() as "
                "bundle_miss_graphs and stored as a bundle_misses row%s",
                self.loaded.bundle_id[:16],
                match.reason,
                {"compiled": "compiled here", "eager": "run eagerly"}.get(match.action, match.action),
                _shape_advice(match.factors),
            )
        request = CURRENT.get()
        event = BundleMissEvent(
            ts=datetime.now(UTC),
            bundle_id=self.loaded.bundle_id,
            host=t.host,
            hw_pool=t.hw_pool,
            model=str((request.model if request is not None else "") or t.model),
            request_id=request.request_id if request is not None else "",
            graph_signature=match.signature,
            graph_key=match.fx_key,
            inputs=match.inputs,
            action=match.action,
            factors=match.factors,
            reason=match.reason,
            compile_s=match.compile_s,
        )
        t.queue.put("record", event)

    def _unqualified(self, served: UnqualifiedShape) -> None:
        """A bundle hit served a call at sizes the bundle never qualified: count it, on the request too (each
        shape, bounded, and each call: :class:`~inferensics.collector.host.records.UnqualifiedCalls`) and say so
        once per shape. Runs on the serving thread inside the call (``_marking`` wraps the session's callable, so
        ``CURRENT`` is the request), and only at unqualified sizes."""
        request = CURRENT.get()
        if request is not None:
            calls = request.bundle_unqualified
            if not calls:
                calls = request.bundle_unqualified = UnqualifiedCalls()
            calls.add(served.shape)
        with self._shapes_lock:
            self.tracker.counters_local["bundle_unqualified_shape_calls"] += 1
            new = served.shape not in self._logged_shapes and len(self._logged_shapes) < LOGGED_SHAPES_LIMIT
            if new:
                self._logged_shapes.add(served.shape)
        if new:
            log.warning(
                "inferensics: bundle %s served a call at graph sizes %s%s, which it never qualified (qualified: %s); "
                "counted in stats() as bundle_unqualified_shape_calls and stored on the request as attrs['%s']. "
                "Rebuild the bundle with this request's input shape in its shape distribution to qualify it",
                self.loaded.bundle_id[:16],
                graph_size_text(served.shape),
                _request_shape_note(served.shape, request.shape if request is not None else None),
                qualified_text(self.loaded.manifest.accepted_shapes, served.qualified),
                BUNDLE_UNQUALIFIED_SHAPE,
            )


def _request_shape_note(sizes: str, shape: Any) -> str:
    """What to say of a request's input shape beside a call's graph sizes (stored form): nothing where they are the
    same numbers, the request's shape where they differ (the model padded it, or the graph sees another tensor), and
    what graph sizes are where the request recorded no shape."""
    try:
        request = shape_signature(shape)
    except ValueError:
        request = ""
    if not request:
        return " (its dynamic inputs' sizes, after any padding the model does)"
    if INPUT_SEPARATOR not in sizes and sizes.strip("[]").replace(",", "x") == request:
        return ""
    return f" (the graph's dynamic sizes; the request's input shape is {request})"


def _shape_advice(factors: tuple[str, ...]) -> str:
    """The end of a miss's log line when the graph's inputs are what differs: which, and how to cover them."""
    shape = next((f for f in factors if f.startswith("accepted_shapes: inputs not qualified")), "")
    if not shape:
        return ""
    said = shape.removeprefix("accepted_shapes: ")
    if STATIC_ADVICE in said:  # the factor ends with both ways: this shape, or --dynamic
        return f"; {said}"
    return f"; {said}; rebuild the bundle with this request's input shape in its shape distribution to cover it"


def _marking(fn: Callable[..., Any], status: str) -> Callable[..., Any]:
    get = CURRENT.get

    def run(*args: Any) -> Any:
        request = get()
        if request is not None and request.bundle_status != "miss":
            request.bundle_status = status
        return fn(*args)

    return run


def _registration(
    tracker: Tracker, directory: Path, state: str, loaded: LoadedBundle | None, keyid: str = ""
) -> BundleEvent | None:
    try:
        manifest = loaded.manifest if loaded is not None else read_manifest_unverified(directory)[0]
    except BundleError:
        return None
    ident = manifest.identity
    versions, compat = ident.get("compiler_versions", {}), ident.get("compatibility", {})
    compile_args = ident.get("settings", {}).get("compile", {})
    try:
        digest = sha256_file(directory / MANIFEST_FILE)
    except OSError:
        digest = ""
    return BundleEvent(
        ts=datetime.now(UTC),
        bundle_id=manifest.bundle_id,
        bundle_name=manifest.name,
        model=tracker.model or str(ident.get("model", {}).get("factory", "")),
        host=tracker.host,
        hw_pool=tracker.hw_pool,
        manifest_digest=digest,
        compiler_config={k: str(v) for k, v in compile_args.items()},
        torch_version=str(versions.get("torch", "")),
        triton_version=str(versions.get("triton", "")),
        cuda_version=str(versions.get("cuda_runtime", "")),
        device_name=str(compat.get("device_name", "")),
        builder_keyid=keyid or str(manifest.build.get("builder_keyid", "")),
        signature_state=state,
        graph_keys=tuple(g.fx_key for g in manifest.graphs),
    )


def install_bundle(
    tracker: Tracker,
    bundle: str | Path | LoadedBundle,
    *,
    keyring: Keyring | str | Path | None = None,
    states: BundleStates | None = None,
    on_bundle_miss: MissPolicy = "compile",
    budget: CompileBudget | None = None,
    dynamic: bool | None = None,
) -> BundleGuard:
    """Verify and load ``bundle`` (a directory or an already loaded bundle), stamp the tracker's records with
    its id, register it, and return the guard for the backend. ``dynamic``: what the caller asked of
    ``torch.compile``; the bundle's recorded options win, and ``dynamic=True`` with a bundle built static is said
    once (logged, and counted in ``stats()`` as ``bundle_dynamic_overridden``).

    Raises:
        BundleError: the bundle is refused (registered with the cause first) or an input is bad.
    """
    if isinstance(bundle, LoadedBundle):
        loaded = bundle
    else:
        directory = Path(bundle)
        try:
            ring = keyring if isinstance(keyring, Keyring) else Keyring.load(keyring)
            t0 = time.perf_counter()
            loaded = load(directory, ring, states=states)
            tracker.counters_local["bundle_load_ms"] += int((time.perf_counter() - t0) * 1e3)
        except BundleError as exc:
            tracker.counters_local[f"bundle_refused_{exc.cause}"] += 1
            event = _registration(tracker, directory, exc.cause, None)
            if event is not None:
                tracker.queue.put("record", event)
            raise
    tracker.bundle_id = loaded.bundle_id
    evidence = loaded.kernel_evidence
    if evidence is not None:
        tracker.counters_local["kernel_evidence_applied"] += len(evidence.applied)
        tracker.counters_local["kernel_evidence_refused"] += len(evidence.refused)
        if evidence.refused:
            log.warning("%s; kernels.registry().log.applications() lists each entry", evidence.summary())
    pipeline = tracker.pipeline
    pipeline.context = dataclasses.replace(pipeline.context, bundle_id=loaded.bundle_id)
    assembler = getattr(pipeline, "assembler", None)
    if assembler is not None and hasattr(assembler, "context"):
        assembler.context = dataclasses.replace(assembler.context, bundle_id=loaded.bundle_id)
    event = _registration(tracker, loaded.directory, "verified", loaded, loaded.builder_keyid)
    if event is not None:
        tracker.queue.put("record", event)
    if dynamic is True and loaded.compile_args.get("dynamic") is False:
        tracker.counters_local["bundle_dynamic_overridden"] += 1
        log.warning(
            "inferensics: tracker.compile(dynamic=True) with bundle %s, which was built static: the bundle's compile "
            "options win over dynamic=True, so each size it did not qualify is a bundle miss (a compile here); "
            "rebuild it with `inferensics bundle build --dynamic` for a batch size that varies; counted in stats() "
            "as bundle_dynamic_overridden",
            loaded.bundle_id[:16],
        )
    return BundleGuard(tracker, loaded, on_bundle_miss=on_bundle_miss, budget=budget)
