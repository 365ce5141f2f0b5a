"""A compile's provider decisions, written when the compile ends, under the sizes the compile settled on.

A provider may fix a symbolic size while it is traced: a Triton launch sizes its blocks from the columns (a guard),
and what such a guard implies for other symbols (a ``cos`` width checked against half the head size) is settled
later in the same compile. A decision signed as it was made would name sizes the graph does not hold, and Dynamo's
pass and AOTAutograd's trace of the same call would record two signatures for one call. So a compile's decisions
are held, with their traced arguments, until Dynamo's end-of-compile callback; then each is signed again, the log
keeps it, and the compile's trace gets one artifact listing each ``(op, signature)`` once.

A decision made outside a compile whose end Dynamo will announce (``make_fx`` alone, export's full-graph capture),
or where this torch has no end-of-compile callback, is kept and written at once, as it was made.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from inferensics.kernels import _torch_adapter
from inferensics.kernels.decisions import Decision, DecisionLog
from inferensics.kernels.signatures import signature

MAX_PENDING = 4096
"""Decisions held for one compile before the oldest are written as made (a runaway trace must not grow memory)."""

_LOCK = threading.Lock()
_PENDING: list[tuple[Decision, Sequence[Any], DecisionLog, Any]] = []
"""Held decisions, each with its traced arguments, its log and the compile that made it (as its trace names it)."""


def hold(decision: Decision, args: Sequence[Any], log: DecisionLog) -> None:
    """Keep ``decision`` (made while compiling, traced with ``args``) until its compile ends; write it now when
    no end will be seen."""
    if (
        not decision.compile_id
        or not _torch_adapter.compile_end_pending()  # a trace outside Dynamo's compile (export's capture, make_fx)
        or not _torch_adapter.on_compile_start_and_end(_compile_edge)
    ):
        _write([_signed(decision, args)], log)
        return
    made_in = _torch_adapter.current_compile()
    with _LOCK:
        if len(_PENDING) >= MAX_PENDING:
            early, args0, log0, made_in0 = _PENDING.pop(0)
            _write([_signed(early, args0)], log0, made_in0)
        _PENDING.append((decision, args, log, made_in))


def _compile_edge(args: Any) -> None:
    # Called when the outermost compile starts and when it ends (Dynamo serialises compiles, and runs these for the
    # outermost only): either way nothing held belongs to a compile still running, so everything held is written
    # now, each compile's decisions in that compile's trace (a compile run inside another has ended too).
    del args
    flush()


def flush() -> None:
    """Write every held decision, each signed under its arguments' sizes now, once per ``(op, signature)`` of the
    compile that made it, into that compile's trace."""
    with _LOCK:
        held = _PENDING[:]
        _PENDING.clear()
    groups: dict[tuple[int, str], tuple[DecisionLog, Any, dict[tuple[str, str, str], Decision]]] = {}
    for decision, args, log, made_in in held:
        d = _signed(decision, args)
        group = groups.setdefault((id(log), str(made_in)), (log, made_in, {}))
        group[2][(d.compile_id, d.op, d.signature)] = d
    for log, made_in, decisions in groups.values():
        _write(list(decisions.values()), log, made_in)


def _signed(decision: Decision, args: Sequence[Any]) -> Decision:
    sig = signature(args)
    return decision if sig == decision.signature else replace(decision, signature=sig)


def _write(decisions: list[Decision], log: DecisionLog, made_in: Any = None) -> None:
    for d in decisions:
        log.record(d)
    if decisions:
        _torch_adapter.emit_decisions(lambda: [d.to_json() for d in decisions], made_in)
