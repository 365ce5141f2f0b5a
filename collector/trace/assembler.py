"""Envelopes → records: one compile record per compile, with its cache lookups, graph breaks, failures,
recompile reasons, output-code blob and kernel inventory.

The live trace sink and the log importer feed the same :class:`CompileAssembler`; only the context
(``source="live"`` or ``"trace"``) and the request attribution differ.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from inferensics.collector.trace.artifacts import (
    CACHE_ARTIFACTS,
    NODE_TRACES_ARTIFACT,
    CacheLookup,
    GraphBreakInfo,
    kernel_nodes,
    kernel_pre_grad_nodes,
    kernel_source_lines,
    parse_cache_artifact,
    parse_graph_break,
    parse_user_context,
)
from inferensics.collector.trace.assembly_stats import AssemblyStats
from inferensics.collector.trace.compile_times import compile_times, phase_times
from inferensics.collector.trace.envelope import Envelope
from inferensics.collector.trace.kernel_rows import (
    Decisions,
    KernelInventory,
    decision_events,
    read_decisions,
    rebase_source_lines,
)
from inferensics.collector.trace.record_kinds import CONSUMED, HEADER_FACTS, NOISE
from inferensics.collector.trace.shape_guards import GUARD_RECORDS, SHAPE_RECORDS, ShapeGuard, ShapeGuardReader
from inferensics.schema import columns as col
from inferensics.schema.events import (
    KERNEL_DECISIONS_ARTIFACT,
    CacheEvent,
    CompileEvent,
    GraphBreakEvent,
    RecompileEvent,
    ShapeGuardEvent,
)
from inferensics.schema.processes import COMPILE_SEQ_ATTR
from inferensics.schema.table import Event

EmitFn = Callable[[Event], None]
BlobFn = Callable[[bytes, str, Mapping[str, str]], str]
"""``put_blob(data, kind, attrs) -> sha256``."""
EntryBytesFn = Callable[[str, str], int]
"""``entry_bytes(cache, key) -> bytes`` of the entry a cache miss wrote (0: unknown)."""

AOT_PREFIX: Final = "aot/"
"""Compile id of a compile that Dynamo did not start (AOTInductor, export): its records carry no frame id."""
LIMIT_MARKERS: Final = ("recompile limit", "recompile_limit", "cache_size_limit", "cache size limit")
SUMMARY_CAPACITY: Final = 4096
ATTRIBUTION_ATTR: Final = "attribution"
"""Attribute set to ``UNATTRIBUTED`` on the records of a live compile that no ``tracker.compile`` made."""
UNATTRIBUTED: Final = "unattributed"
Origin = tuple[str, bool, str]
"""``(model label, attributed, code location override)`` of a live compile (see the host's trace sink)."""


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def graph_key_for(fx_cache_key: str, code_location: str, graph_text: str = "") -> str:
    """The stable graph identity (ARCHITECTURE decision 3)."""
    base = fx_cache_key or (_sha(graph_text) if graph_text else "")
    return _sha(f"{base}@{code_location}") if base else ""


@dataclass(frozen=True, slots=True)
class AssemblyContext:
    """Labels stamped on every record an assembler emits."""

    host: str
    model: str = ""
    hw_pool: str = ""
    bundle_id: str = ""
    source: str = "live"
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class CompileSummary:
    """What request classification needs to know about a finished compile."""

    compile_id: str
    outcome: str
    cache_status: str
    entire_frame_s: float
    graph_key: str
    artifact_id: str
    recompile: bool
    fail_type: str = ""
    break_ids: list[str] = field(default_factory=list)
    fx_cache_key: str = ""
    model: str = ""
    """The model label of the compile's records (the ``name`` of the ``tracker.compile`` that made it)."""


@dataclass
class _Compile:
    compile_id: str
    frame_compile_id: int
    ts: datetime
    request_id: str = ""
    attempt: int = 0
    fx_cache_key: str = ""
    cache_status: str = "none"
    aot_status: str = "none"
    output_code: str = ""
    graph_text: str = ""
    guard_digest: str = ""
    recompile_reasons: list[str] = field(default_factory=list)
    breaks: list[tuple[GraphBreakInfo, datetime]] = field(default_factory=list)
    nodes: dict[str, list[str]] = field(default_factory=dict)
    lines: dict[str, list[str]] = field(default_factory=dict)
    pre_nodes: dict[str, list[str]] = field(default_factory=dict)
    node_traces: dict[str, str] | None = None
    error_text: str = ""
    started: bool = False
    origin: Origin | None = None
    providers: Decisions = field(default_factory=dict)
    unsized: list[CacheEvent] = field(default_factory=list)
    """Misses whose entry is measured once the compile ends (a live compile's, see ``entry_bytes``)."""
    seq: int = 0
    """How many compiles with this id the assembler saw before (ids repeat after ``torch._dynamo.reset()``)."""


class CompileAssembler:
    """Stateful envelope consumer; call :meth:`feed` per envelope and :meth:`finish` at the end."""

    def __init__(
        self,
        context: AssemblyContext,
        emit: EmitFn,
        put_blob: BlobFn | None = None,
        entry_bytes: EntryBytesFn | None = None,
    ) -> None:
        """``entry_bytes`` sizes what a miss wrote where the cache is on this machine (live); a log does not say."""
        self.context = context
        self._emit = emit
        self._put_blob = put_blob
        self._entry_bytes = entry_bytes
        self._open: dict[str, _Compile] = {}
        self._aot: _Compile | None = None  # the compile without a frame id in progress (AOTInductor)
        self._aot_count = 0
        self._damaged_last = 0  # line of the last record fed, when its payload is damaged
        self._shapes = ShapeGuardReader()
        self._blobs: set[str] = set()
        self._inventory = KernelInventory(every_time=context.source == "live")
        self._seen: Counter[str] = Counter()  # compiles per id so far
        self._frame_locations: OrderedDict[str, str] = OrderedDict()  # frame id → its code location, last seen
        self.summaries: OrderedDict[str, CompileSummary] = OrderedDict()
        self.stats = AssemblyStats()

    # --- helpers -----------------------------------------------------------------------------------

    def _labels(self, state: _Compile) -> dict[str, Any]:
        c = self.context
        model = state.origin[0] if state.origin is not None else c.model
        return {col.HOST: c.host, col.MODEL: model, col.HW_POOL: c.hw_pool}

    def _attrs(self, state: _Compile) -> dict[str, str]:
        attrs = dict(self.context.attrs)
        if state.origin is not None and not state.origin[1]:
            attrs[ATTRIBUTION_ATTR] = UNATTRIBUTED
        if state.seq:
            attrs[COMPILE_SEQ_ATTR] = str(state.seq)
        return attrs

    def _blob(self, text: str, kind: str, attrs: Mapping[str, str] | None = None) -> str:
        data = text.encode("utf-8")
        digest = _sha(data)
        if self._put_blob is not None and digest not in self._blobs:
            self._blobs.add(digest)
            self._put_blob(data, kind, dict(attrs or {}))
            self.stats.blobs += 1
        return digest

    def _state(self, env: Envelope, request_id: str, origin: Origin | None) -> _Compile | None:
        cid = env.compile_id
        if not cid:
            return None
        state = self._open.get(cid)
        if state is None:
            state = _Compile(cid, env.frame_compile_id or 0, env.ts or datetime.now(UTC), request_id=request_id)
            state.seq = self._seen[cid]
            self._seen[cid] += 1
            self._open[cid] = state
        if origin is not None and (state.origin is None or env.kind == "dynamo_start"):
            state.origin = origin
        if request_id and not state.request_id:
            state.request_id = request_id
        state.attempt = max(state.attempt, env.attempt)
        return state

    # --- feeding -----------------------------------------------------------------------------------

    def feed(self, env: Envelope, request_id: str = "", origin: Origin | None = None) -> None:
        """Consume one envelope.

        Args:
            env: The record.
            request_id: The request active when a live record was emitted.
            origin: Who made the live compile the record belongs to (``None``: the context's model).
        """
        name = env.name
        if (
            name == "graph_dump"
            and isinstance(env.body, Mapping)
            and env.body.get("name") == "inductor_aot_wrapper_code"
        ):
            name = "inductor_aot_wrapper_code"  # AOTInductor's output code (C++), as a graph dump
        self._damaged_last = env.lineno if not env.payload_ok else 0
        if not env.payload_ok:
            self.stats.damaged_payloads += 1
            self.stats.first_damaged_payload = self.stats.first_damaged_payload or env.lineno
            if name not in HEADER_FACTS:
                return
            env = replace(env, payload=None, payload_ok=True)  # the header still says what happened
        if name in SHAPE_RECORDS:
            for guard in self._shapes.feed(env, name):
                self._shape_guard(guard)
            if name in GUARD_RECORDS:
                return
        if name in NOISE:
            return
        if name not in CONSUMED:
            self.stats.unused[name] += 1
            return
        if not env.compile_id:
            self._feed_aot(env, name)
            return
        if name == KERNEL_DECISIONS_ARTIFACT and env.compile_id not in self._open and env.compile_id in self.summaries:
            self._late_decisions(env, request_id, origin)  # a nested compile's, written after it ended
            return
        if name == "dynamo_start":
            old = self._open.get(env.compile_id)
            if old is not None and old.started:
                self._finalize(self._open.pop(env.compile_id), None)  # a reset reuses ids: close the old one
        state = self._state(env, request_id, origin)
        if state is None:
            return
        if name == "dynamo_start":
            state.started = True
        if name == "compilation_metrics":
            self._finalize(self._open.pop(state.compile_id), env.body if isinstance(env.body, Mapping) else {})
        elif name == "dynamo_output_graph":
            state.graph_text = env.payload or ""
        elif name in ("inductor_output_code", "inductor_aot_wrapper_code"):
            state.output_code = env.payload or ""
        elif name == "dynamo_cpp_guards_str":
            state.guard_digest = self._blob(env.payload or "", "guard_tree", {"compile_id": state.compile_id})
        elif name == "recompile_reasons":
            state.recompile_reasons.extend(_reasons(env.payload or ""))
        elif name == "dynamo_graph_break_reason":
            self._graph_break(state, env.payload or "")
        elif name in ("dynamo_error",):
            state.error_text = (env.payload or "")[-2000:]
        elif name in ("inductor_provenance_tracking_node_mappings", "inductor_triton_kernel_to_post_grad_nodes"):
            mappings = _json(env)
            for k, v in kernel_nodes(mappings).items():
                state.nodes.setdefault(k, v)
            for k, v in kernel_pre_grad_nodes(mappings).items():
                state.pre_nodes.setdefault(k, v)
        elif name == "inductor_provenance_tracking_kernel_stack_traces":
            state.lines.update(kernel_source_lines(_json(env)))
        elif name == NODE_TRACES_ARTIFACT:
            traces = _json(env)
            if isinstance(traces, Mapping):
                state.node_traces = {str(k): str(v) for k, v in traces.items() if v}
        elif name == KERNEL_DECISIONS_ARTIFACT:
            read_decisions(_json(env), state.providers)
        else:
            lookup = parse_cache_artifact(name, _json(env)) if name.endswith(("_hit", "_miss", "_bypass")) else None
            if lookup is not None:
                self._cache(state, lookup)

    def _feed_aot(self, env: Envelope, name: str) -> None:
        """A record outside any Dynamo frame: part of an AOTInductor (or export) compile, which ends with
        its ``compilation_metrics`` (compile id ``null``).

        A strict ``torch.export`` traces the module with Dynamo without starting a compile: the capture's records
        carry a frame's id (``0/0``) but there is no ``dynamo_start``, and its guards and ``compilation_metrics``
        come after the frame, with no id. Those end that frame's compile; they do not start another one.
        """
        capture = self._capture() if self._aot is None else None
        if capture is not None and name == "compilation_metrics":
            self._finalize(self._open.pop(capture.compile_id), env.body if isinstance(env.body, Mapping) else {})
            return
        if capture is not None and name == "dynamo_cpp_guards_str" and not capture.guard_digest:
            capture.guard_digest = self._blob(env.payload or "", "guard_tree", {"compile_id": capture.compile_id})
            return
        if name not in ("compilation_metrics", "inductor_output_code", "inductor_aot_wrapper_code", *CACHE_ARTIFACTS):
            self.stats.unused[name] += 1
            return
        state = self._aot
        if state is None:
            state = _Compile(f"{AOT_PREFIX}{self._aot_count}", 0, env.ts or datetime.now(UTC), started=True)
            self._aot_count += 1
            self._aot = state
        if name == "compilation_metrics":
            self._aot = None
            self._finalize(state, env.body if isinstance(env.body, Mapping) else {})
        elif name in ("inductor_output_code", "inductor_aot_wrapper_code"):
            state.output_code = env.payload or state.output_code
        else:
            lookup = parse_cache_artifact(name, _json(env))
            if lookup is not None:
                self._cache(state, lookup)

    def _capture(self) -> _Compile | None:
        """The latest open compile that Dynamo did not start (a strict export's capture), if any."""
        return next((s for s in reversed(self._open.values()) if not s.started), None)

    def _late_decisions(self, env: Envelope, request_id: str, origin: Origin | None) -> None:
        """Provider decisions for a compile that has already ended: rows of that compile (its graph, its labels),
        not a second, never-finished record of it. The kernel registry writes a compile's decisions when the
        outermost compile ends, so a compile run inside another (a backend that compiles a helper) gets them after
        its own end where this torch logs that end."""
        summary = self.summaries[env.compile_id]
        state = _Compile(env.compile_id, env.frame_compile_id or 0, env.ts or datetime.now(UTC), origin=origin)
        if origin is None and summary.model != self.context.model:
            state.origin = (summary.model, True, "")
        read_decisions(_json(env), state.providers)
        self._kernel_decisions(state, state.ts, request_id, summary.graph_key)

    def _kernel_decisions(self, state: _Compile, ts: datetime, request_id: str, graph_key: str) -> None:
        labels, attrs = self._labels(state), self._attrs(state)
        for row in decision_events(
            state.providers,
            ts=ts,
            labels=labels,
            request_id=request_id,
            graph_key=graph_key,
            compile_id=state.compile_id,
            attrs=attrs,
        ):
            self._emit(row)

    def finish(self) -> None:
        """Emit the compiles that never got their metrics (truncated logs, process exit)."""
        self.stats.cut_off_at = self._damaged_last
        for state in list(self._open.values()):
            self._finalize(state, None)
        self._open.clear()
        if self._aot is not None:
            self._finalize(self._aot, None)
            self._aot = None
        for guard in self._shapes.finish():
            self._shape_guard(guard)

    def _shape_guard(self, guard: ShapeGuard) -> None:
        attrs = dict(self.context.attrs)
        attrs["record"] = guard.record
        if guard.code:
            attrs["code"] = guard.code
        self.stats.shape_guards += 1
        live = self.context.source == "live"
        self._emit(
            ShapeGuardEvent(
                ts=datetime.now(UTC) if live or guard.ts is None else guard.ts,
                host=self.context.host,
                model=self.context.model,
                hw_pool=self.context.hw_pool,
                compile_id=guard.scope,
                expr=guard.expr,
                symbol_sources=guard.symbol_sources,
                user_frame=guard.user_frame,
                source="live" if live else "trace",
                attrs=attrs,
            )
        )

    def _graph_break(self, state: _Compile, text: str) -> None:
        # Held until the compile's metrics arrive: they name the compiled frame (the break's code location).
        info = parse_graph_break(text)
        state.breaks.append((info, datetime.now(UTC) if self.context.source == "live" else state.ts))
        self.stats.graph_breaks += 1

    def _emit_breaks(self, state: _Compile, location: str) -> None:
        for info, ts in state.breaks:
            self._emit(
                GraphBreakEvent(
                    ts=ts,
                    **self._labels(state),
                    request_id=state.request_id,
                    compile_id=state.compile_id,
                    code_location=location,
                    registry_id=info.registry_id,
                    break_type=info.break_type,
                    reason=info.reason,
                    user_frame=info.user_frame,
                    source=self.context.source,
                    attrs=self._attrs(state),
                )
            )

    def _cache(self, state: _Compile, lookup: CacheLookup) -> None:
        cache, result, key = lookup.cache, lookup.result, lookup.key
        self.stats.cache[f"{cache}_{result}"] += 1
        if cache == "fx_graph":
            state.fx_cache_key = key or state.fx_cache_key
            state.cache_status = result if state.cache_status in ("none", result) else "mixed"
        elif cache == "aot_autograd":
            state.aot_status = result if state.aot_status in ("none", result) else "mixed"
        event = CacheEvent(
            ts=datetime.now(UTC) if self.context.source == "live" else state.ts,
            **self._labels(state),
            bundle_id=self.context.bundle_id,
            request_id=state.request_id,
            compile_id=state.compile_id,
            cache=cache,
            result=result,
            cache_key=key,
            reason=lookup.reason,
            time_saved_ms=lookup.time_saved_ms,
            source=self.context.source,
            attrs=self._attrs(state),
        )
        if self._entry_bytes is not None and result == "miss" and key:
            state.unsized.append(event)  # sized when the compile ends: AOTAutograd saves its entry after the miss
        else:
            self._emit(event)

    def _finalize(self, state: _Compile, metrics: Mapping[str, Any] | None) -> None:
        if self._entry_bytes is not None:
            for e in state.unsized:
                self._emit(e.model_copy(update={col.ENTRY_BYTES: self._entry_bytes(e.cache, e.cache_key)}))
        m: Mapping[str, Any] = metrics or {}
        location = ":".join(str(m.get(k) or "") for k in ("co_filename", "co_firstlineno", "co_name"))
        location = "" if location == "::" else location
        if state.origin is not None and state.origin[2]:
            location = state.origin[2]  # the model's own forward, not the decorator that wraps it
        frame = state.compile_id.rsplit("/", 1)[0]
        if location:
            self._frame_locations[frame] = location
            while len(self._frame_locations) > SUMMARY_CAPACITY:
                self._frame_locations.popitem(last=False)
        else:  # a frame at its recompile limit starts no compile, and its metrics name no code: its frame's
            location = self._frame_locations.get(frame, "")
        fail_type = str(m.get("fail_type") or "")
        fail_reason = str(m.get("fail_reason") or "")
        if fail_type and any(s in fail_reason.lower() for s in LIMIT_MARKERS):
            outcome = "recompile_limit"
            self.stats.recompile_limit += 1
        elif fail_type:
            outcome = "failed"
        else:
            outcome = "ok" if metrics is not None else "incomplete"
        self.stats.failures += outcome in ("failed", "recompile_limit")
        if not state.breaks:
            for r in m.get("restart_reasons") or []:
                if "graph_break" in str(r) or "graph break" in str(r).lower():
                    self._graph_break(state, str(r))
        self._emit_breaks(state, location)
        self.stats.stale_source_lines += rebase_source_lines(state.lines, state.pre_nodes, state.node_traces)
        artifact_id = self._blob(state.output_code, "output_code") if state.output_code else ""
        # A graph Inductor compiled to nothing (no ops after AOTAutograd: views, detach) has no output code
        # and no FX-graph-cache key, yet it is served: its identity is the digest of the Dynamo graph.
        served = artifact_id or (outcome == "ok" and state.graph_text)
        graph_key = graph_key_for(state.fx_cache_key, location, state.graph_text) if served else ""
        # The FX-graph cache decides whether Inductor ran; without an FX lookup (AOTAutograd's cache hit
        # or missed first, or the graph had no ops) AOTAutograd's lookups are the compile's cache status.
        cache_status = state.cache_status if state.cache_status != "none" else state.aot_status
        request_id = parse_user_context(m.get("recompile_user_contexts")) or state.request_id
        reasons = state.recompile_reasons or ([str(m["recompile_reason"])] if m.get("recompile_reason") else [])
        is_recompile = state.frame_compile_id > 0
        times = compile_times(m)
        ts = times.start or state.ts
        attrs = {**phase_times(m), **self._attrs(state)}
        if m.get("recompile_user_contexts"):
            attrs["recompile_user_context"] = ";".join(sorted(str(x) for x in m["recompile_user_contexts"]))
        if state.error_text:
            attrs["error_tail"] = state.error_text[-500:]
        if self.context.source != "live":
            attrs["frame_compile_id"] = str(state.frame_compile_id)
        self.stats.compiles += 1
        self._emit(
            CompileEvent(
                ts=ts,
                **self._labels(state),
                bundle_id=self.context.bundle_id,
                request_id=request_id,
                graph_key=graph_key,
                code_location=location,
                compile_id=state.compile_id,
                attempt=min(state.attempt, 255),
                trigger="import" if self.context.source != "live" else ("recompile" if is_recompile else "first"),
                entire_frame_s=times.entire_frame_s,
                backend_s=times.backend_s,
                inductor_s=times.inductor_s,
                codegen_s=times.codegen_s,
                outcome=outcome,
                fail_type=fail_type,
                fail_reason=fail_reason[:4000],
                recompile_reason=reasons[0] if reasons else "",
                guard_count=_u(m.get("guard_count")),
                graph_op_count=_u(m.get("graph_op_count")),
                graph_node_count=_u(m.get("graph_node_count")),
                graph_break_count=min(len(state.breaks), 65535),
                artifact_id=artifact_id,
                fx_cache_key=state.fx_cache_key,
                cache_status=cache_status,
                guard_tree_digest=state.guard_digest,
                dynamo_config_digest=self._config(m.get("dynamo_config"), "dynamo"),
                inductor_config_digest=self._config(m.get("inductor_config"), "inductor"),
                torch_version=str(m.get("pytorch_version") or ""),
                triton_version=str(m.get("triton_version") or ""),
                cuda_version=str(m.get("cuda_version") or ""),
                source="live" if self.context.source == "live" else "trace",
                # One per (op, signature), one-to-one with the kernel_decisions rows below (an op traced at two
                # shapes is listed twice); readers count repeats, as the request page does.
                kernel_providers=tuple(f"{op}={d['provider']}" for (op, _), d in sorted(state.providers.items())),
                attrs=attrs,
            )
        )
        self._kernel_decisions(state, ts, request_id, graph_key)
        if is_recompile and (reasons or outcome == "recompile_limit"):
            self.stats.recompiles += 1
            self._emit(
                RecompileEvent(
                    ts=ts,
                    **self._labels(state),
                    request_id=request_id,
                    code_location=location,
                    compile_id=state.compile_id,
                    reason=_strip_id(reasons[0]) if reasons else "",
                    reasons=tuple(reasons),
                    attrs={**self._attrs(state), "outcome": outcome},
                )
            )
        if artifact_id:
            for row in self._inventory.rows(
                state.output_code,
                artifact_id=artifact_id,
                graph_key=graph_key,
                nodes=state.nodes,
                lines=state.lines,
                ts=ts,
                host=self.context.host,
            ):
                self.stats.kernels += 1
                self._emit(row)
        self.summaries[state.compile_id] = CompileSummary(
            compile_id=state.compile_id,
            outcome=outcome,
            cache_status=cache_status,
            entire_frame_s=times.entire_frame_s,
            graph_key=graph_key,
            artifact_id=artifact_id,
            recompile=is_recompile,
            fail_type=fail_type,
            break_ids=[info.registry_id for info, _ in state.breaks],
            fx_cache_key=state.fx_cache_key,
            model=self._labels(state)[col.MODEL],
        )
        while len(self.summaries) > SUMMARY_CAPACITY:
            self.summaries.popitem(last=False)

    def _config(self, value: Any, which: str) -> str:
        if not value:
            return ""
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        return self._blob(text, "config", {"config": which})


def _json(env: Envelope) -> Any:
    try:
        return env.payload_json()
    except ValueError:
        return None


def _reasons(payload: str) -> list[str]:
    text = payload.strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
            return [str(x) for x in items] if isinstance(items, list) else [text]
        except ValueError:
            pass
    return [text] if text else []


def _strip_id(reason: str) -> str:
    head, sep, tail = reason.partition(": ")
    return tail if sep and "/" in head and " " not in head else reason


def _u(value: Any) -> int:
    return max(0, min(int(value), 2**32 - 1)) if isinstance(value, int) and not isinstance(value, bool) else 0
