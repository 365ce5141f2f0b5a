"""Reading the payloads of individual trace artifacts: graph-break reports, cache lookups, output code.

Pure functions over strings and dicts, shared by the live sink and the log importer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

CACHE_ARTIFACTS: Final = {
    "fx_graph_cache_hit": ("fx_graph", "hit"),
    "fx_graph_cache_miss": ("fx_graph", "miss"),
    "fx_graph_cache_bypass": ("fx_graph", "bypass"),
    "aotautograd_cache_hit": ("aot_autograd", "hit"),
    "aotautograd_cache_miss": ("aot_autograd", "miss"),
    "aotautograd_cache_bypass": ("aot_autograd", "bypass"),
}
"""Artifact name → (cache, result) for the compile-cache lookups a trace records."""
NODE_TRACES_ARTIFACT: Final = "inferensics_node_stack_traces"
"""Structured-trace artifact the host SDK's backend writes for each compile it makes with provenance on: the
graph it was handed, as ``{node name: node.meta['stack_trace']}``. Inductor's kernel stack traces come from
the FX-graph cache on a hit, recorded by whichever process compiled the graph first (another checkout, or
an edited file whose code did not change); the current graph's traces say where this process's code is."""
PROCESS_ARTIFACT: Final = "inferensics_process"
"""Structured-trace artifact a tracker writes when it starts: ``{"process": key, "host": ..., "model": ...}``.
In a ``TORCH_TRACE`` log it tells ``import-trace`` that the process's compiles were recorded live under that
key (``inferensics.schema.processes``), so they are not stored twice."""

_GB_ID: Final = re.compile(r"\bgb(\d{4})\b", re.IGNORECASE)
_GB_ID_UPPER: Final = re.compile(r"\b(GB\d{4})\b")
_GB_TYPE: Final = re.compile(r"Graph Break Reason:\s*(.+)")
_GB_TYPE_LINE: Final = re.compile(r"^(.*\S.*)\n[ \t]*Explanation:", re.MULTILINE)
_GB_AT: Final = re.compile(r"Graph break in user code at\s*(\S+)")
_GB_EXPL: Final = re.compile(r"Explanation:\s*(.+)")
_GB_FRAME: Final = re.compile(r'^[ \t]*File "([^"]+)", line (\d+), in (.+)$', re.MULTILINE)
_KERNEL_DEF: Final = re.compile(r"^(\w+) = async_compile\.(\w+)\(", re.MULTILINE)
_EXTERN: Final = re.compile(r"\b(extern_kernels\.\w+)\(")


def process_key(payload: str | None) -> str:
    """The process key a :data:`PROCESS_ARTIFACT` payload names (``""``: none readable)."""
    try:
        body = json.loads(payload or "")
    except ValueError:
        return ""
    key = body.get("process") if isinstance(body, dict) else None
    return key if isinstance(key, str) else ""


@dataclass(frozen=True, slots=True)
class GraphBreakInfo:
    """What a ``dynamo_graph_break_reason`` report says."""

    registry_id: str
    break_type: str
    reason: str
    user_frame: str


def parse_graph_break(text: str) -> GraphBreakInfo:
    """Read the registry id (``GB0170``), type, explanation and user frame out of a graph-break report."""
    gb = _GB_ID_UPPER.search(text)
    registry_id = gb.group(1) if gb else ""
    if not registry_id:
        link = _GB_ID.search(text)
        registry_id = f"GB{link.group(1)}" if link else ""
    expl = _GB_EXPL.search(text)
    first_line = text.strip().splitlines()[0] if text.strip() else ""
    return GraphBreakInfo(
        registry_id=registry_id,
        break_type=_break_type(text),
        reason=(expl.group(1).strip() if expl else first_line)[:2000],
        user_frame=_user_frame(text),
    )


def _break_type(text: str) -> str:
    # PyTorch writes a break as "<Gb_type>\n  Explanation: ..." (torch._dynamo.exc.format_graph_break_message).
    # The "Graph Break Reason:" line holds the Gb_type only for some breaks; breaks met while tracing an
    # instruction put "Encountered graph break when attempting to trace CALL: ...:" there and the Gb_type
    # after a blank line, so the line above "Explanation:" is the one that names the type.
    above = _GB_TYPE_LINE.search(text)
    if above:
        line = above.group(1).strip()
        return line.removeprefix("Graph Break Reason:").strip() or line
    kind = _GB_TYPE.search(text)
    return kind.group(1).strip() if kind else ""


def _user_frame(text: str) -> str:
    """``file:line in function``: the innermost frame of the report's user traceback, else ``file:line``."""
    at = _GB_AT.search(text)
    where = at.group(1).strip() if at else ""
    _, found, tail = text.partition("User code traceback:")
    frames = _GB_FRAME.findall(tail.split("\n\n", 1)[0]) if found else []
    if frames:
        path, line, function = frames[-1]
        if not where or where == f"{path}:{line}":
            return f"{path}:{line} in {function.strip()}"
    return where


@dataclass(frozen=True, slots=True)
class CacheLookup:
    """One compile-cache lookup read from a cache artifact."""

    cache: str
    result: str
    key: str
    reason: str
    time_saved_ms: float


def parse_cache_artifact(name: str, payload: Any) -> CacheLookup | None:
    """Decode a ``fx_graph_cache_*`` / ``aotautograd_cache_*`` artifact; ``None`` for other names."""
    kind = CACHE_ARTIFACTS.get(name)
    if kind is None:
        return None
    body: Mapping[str, Any] = payload if isinstance(payload, Mapping) else {}
    key = body.get("key")
    reason = body.get("cache_bypass_reason") or body.get("reason") or ""
    if not reason and kind[1] == "miss":
        reason = str(body.get("cache_status_detailed") or "")
    return CacheLookup(
        cache=kind[0],
        result=kind[1],
        key=str(key) if key else "",
        reason=str(reason)[:2000],
        time_saved_ms=_time_saved_ms(body),
    )


def _time_saved_ms(body: Mapping[str, Any]) -> float:
    """What a hit saved, in milliseconds: AOTAutograd's lookups say ``time_saved_ms``, the FX-graph cache's
    ``time_saved_ns`` (the compile time recorded with the entry); 0.0 when neither is there."""
    for field, to_ms in (("time_saved_ms", 1.0), ("time_saved_ns", 1e-6)):
        value = body.get(field)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) * to_ms
    return 0.0


def kernels_in_output_code(code: str) -> list[tuple[str, str]]:
    """(kernel name, backend) for each kernel an Inductor output module defines or calls, in order."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for m in _KERNEL_DEF.finditer(code):
        name, how = m.group(1), m.group(2)
        backend = "triton" if how == "triton" else ("cpp" if how.startswith("cpp") else how)
        if name not in seen:
            seen.add(name)
            out.append((name, backend))
    for m in _EXTERN.finditer(code):
        if m.group(1) not in seen:
            seen.add(m.group(1))
            out.append((m.group(1), "extern"))
    return out


def kernel_nodes(mappings: Any) -> dict[str, list[str]]:
    """Kernel → post-grad nodes from a provenance mapping artifact (``cppCodeToPost`` or a flat dict)."""
    if not isinstance(mappings, Mapping):
        return {}
    table = mappings.get("cppCodeToPost", mappings)
    out: dict[str, list[str]] = {}
    if not isinstance(table, Mapping):
        return out
    for kernel, nodes in table.items():
        if not isinstance(nodes, list):
            continue
        name = str(kernel).split(":", 1)[0]
        out.setdefault(name, []).extend(str(n) for n in nodes if str(n) not in out.get(name, []))
    return out


def kernel_pre_grad_nodes(mappings: Any) -> dict[str, list[str]]:
    """Kernel → the nodes of the graph handed to Inductor that it computes (``cppCodeToPost`` then
    ``postToPre`` of a provenance mapping artifact)."""
    if not isinstance(mappings, Mapping):
        return {}
    to_post, to_pre = mappings.get("cppCodeToPost"), mappings.get("postToPre")
    if not isinstance(to_post, Mapping) or not isinstance(to_pre, Mapping):
        return {}
    out: dict[str, list[str]] = {}
    for kernel, posts in to_post.items():
        nodes = out.setdefault(str(kernel).split(":", 1)[0], [])
        for post in posts if isinstance(posts, list) else []:
            pres = to_pre.get(post)
            for pre in pres if isinstance(pres, list) else []:
                if str(pre) not in nodes:
                    nodes.append(str(pre))
    return out


def source_file(ref: str) -> str:
    """The file of a ``file:line`` reference."""
    return ref.rsplit(":", 1)[0]


def kernel_source_lines(stack_traces: Any) -> dict[str, list[str]]:
    """Kernel → user source lines (``file:line``) from ``inductor_provenance_tracking_kernel_stack_traces``."""
    if not isinstance(stack_traces, Mapping):
        return {}
    out: dict[str, list[str]] = {}
    loc = re.compile(r'File "?([^",]+)"?, line (\d+)')
    for kernel, traces in stack_traces.items():
        lines: list[str] = []
        items = traces if isinstance(traces, list) else [traces]
        for t in items:
            for m in loc.finditer(str(t)):
                ref = f"{m.group(1)}:{m.group(2)}"
                if ref not in lines:
                    lines.append(ref)
        out[str(kernel).split(":", 1)[0]] = lines
    return out


def parse_user_context(contexts: Any) -> str:
    """The request id inside ``recompile_user_contexts`` (``request_id=<id>``), or ``""``."""
    items = contexts if isinstance(contexts, list | tuple | set) else [contexts] if contexts else []
    for item in items:
        text = str(item)
        for part in text.split(";"):
            k, _, v = part.partition("=")
            if k.strip() == "request_id" and v:
                return v.strip()
    return ""
