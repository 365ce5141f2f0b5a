"""Turning what the hooks saw during a request into its outcome, guard outcome, cache status and
fallback reason (the vocabulary of :class:`~inferensics.schema.events.RequestEvent`).

Rules, in order:

* the request raised → ``error`` (``fallback_reason`` ``compile_error`` when a compile failed in it);
* some frame of the request ran eagerly because of the recompile limit → ``fallback`` /
  ``recompile_limit``, even when other frames of it ran compiled graphs (e.g. prefill hit, decode over the
  limit). That is: a compile in the request hit the limit, or the limit was hit earlier and the request
  had more guard misses than compiles those misses triggered (a miss that compiled nothing ran eagerly);
* a compile failed and Dynamo ran the frame eagerly → ``fallback`` / ``compile_error``;
* it compiled → ``recompile`` when any compile was a recompile, else ``compile``;
* it ran compiled graphs only → ``hit``;
* no graph ran: a graph break left nothing to compile → ``fallback`` / ``graph_break:<id>``;
* no graph ran, nothing compiled, no guard was evaluated, and a compile failed earlier in the process with
  the error suppressed → ``fallback`` / ``compile_error``: Dynamo marks a frame whose compile failed under
  ``suppress_errors`` to be skipped, and from then on runs it eagerly on every call without evaluating a
  guard or calling a backend, so nothing else in such a request says why it ran eagerly (a request that
  never entered a compiled frame is counted the same way in that process);
* otherwise ``eager``.

The cache status covers every compile of the request: each compile's FX-graph (else AOTAutograd) cache
result, a compile that served a graph without any recorded lookup counting as ``miss`` (it compiled);
several results make ``mixed``. ``none`` means the request compiled nothing that served a graph.

A request served partly eagerly because its frames have graph breaks keeps its dispatch outcome (``hit``,
``compile``...) and carries ``fallback_reason`` ``graph_break:<registry id>``.

A frame that breaks before any tensor op compiles no graph of its own: later calls of it hit its guards and
run no graph (``print(...)`` then the rest). The caller passes ``graphless_break`` (the registry id of such a
break seen in the process) when the request had more guard hits than graph calls; it is the break reason when
no graph of the request names one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferensics.collector.trace.assembler import CompileSummary


@dataclass(frozen=True, slots=True)
class Classification:
    """The dispatch fields of one request record."""

    outcome: str
    guard_outcome: str
    cache_status: str
    fallback_reason: str
    compile_ms: float
    recompiles: int


def classify(
    *,
    errored: bool,
    guard_hits: int,
    guard_misses: int,
    compiles: Sequence[CompileSummary],
    graph_compile_ids: Sequence[str],
    summaries: Mapping[str, CompileSummary],
    limit_hit_before: bool,
    backend_compile_ms: float,
    failed_before: bool = False,
    graphless_break: str = "",
) -> Classification:
    """Classify one request (pure; see the module docstring for the rules)."""
    if guard_hits and guard_misses:
        guard = "mixed"
    elif guard_hits:
        guard = "hit"
    elif guard_misses:
        guard = "miss"
    else:
        guard = "first" if compiles else "none"
    statuses = {_cache_status(c) for c in compiles} - {"none"}
    cache = "none" if not statuses else (statuses.pop() if len(statuses) == 1 else "mixed")
    compile_ms = sum(c.entire_frame_s for c in compiles) * 1000.0 or backend_compile_ms
    recompiles = sum(1 for c in compiles if c.recompile and c.outcome == "ok")
    breaks = [b for cid in graph_compile_ids for b in (summaries[cid].break_ids if cid in summaries else ())]
    breaks += [b for c in compiles for b in c.break_ids]
    if not breaks and graphless_break:
        breaks = [graphless_break]
    break_reason = f"graph_break:{breaks[0] or 'unknown'}" if breaks else ""
    limit = any(c.outcome == "recompile_limit" for c in compiles)
    failed = any(c.outcome == "failed" for c in compiles)
    ok = [c for c in compiles if c.outcome == "ok"]

    # Every guard miss either triggers a compile (a recompile, successful or not) or, past the limit,
    # an eager run of that frame.
    eager_misses = guard_misses - sum(1 for c in compiles if c.recompile)
    over_limit = limit or (limit_hit_before and eager_misses > 0)

    if errored:
        outcome, reason = "error", ("compile_error" if failed else "")
    elif over_limit:
        outcome, reason = "fallback", "recompile_limit"
    elif failed and not graph_compile_ids:
        outcome, reason = "fallback", "compile_error"
    elif ok:
        outcome = "recompile" if recompiles else "compile"
        reason = "compile_error" if failed else break_reason
    elif graph_compile_ids:
        outcome, reason = "hit", break_reason
    elif break_reason:
        outcome, reason = "fallback", break_reason
    elif failed_before and not (compiles or guard_hits or guard_misses):
        outcome, reason = "fallback", "compile_error"
    else:
        outcome, reason = "eager", ""
    return Classification(outcome, guard, cache, reason, compile_ms, min(recompiles, 255))


def _cache_status(summary: CompileSummary) -> str:
    """A compile's part in the request's cache status: its cache lookups' result; ``miss`` for a compile
    that produced a served graph without any lookup the trace recorded (it compiled: the caches were off,
    bypassed without a record, or never consulted), so that a request whose one compile hit and another
    compiled for minutes reads ``mixed``, not ``hit``; ``none`` for a compile that served no graph."""
    if summary.cache_status != "none":
        return summary.cache_status
    return "miss" if summary.outcome == "ok" and summary.graph_key else "none"
