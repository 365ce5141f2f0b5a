"""Symbolic-shape guards out of trace records: what ``torch.export`` and Dynamo assumed about input sizes.

PyTorch writes each guard its shape environment adds twice when both sinks listen: ``guard_added`` (only
under ``TORCH_DTRACE``: the expression, the symbols' sources and the user frames PyTorch itself picked)
and ``guard_added_fast`` (always: the expression and the full stack). File names in those stacks are
interned by ``str`` records, and symbols are introduced by ``create_symbol`` records, so the reader keeps
both tables. A ``guard_added`` and the ``guard_added_fast`` that follows it for the same expression are
one guard: the pair becomes one :class:`ShapeGuard`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from inferensics.collector.trace.envelope import Envelope

GUARD_RECORDS: Final = frozenset({"guard_added", "guard_added_fast"})
"""Record kinds that add a guard."""
SHAPE_RECORDS: Final = frozenset({*GUARD_RECORDS, "str", "create_symbol", "create_unbacked_symbol", "exported_program"})
"""Record kinds the reader looks at (the string table, symbol sources, export boundaries, guards)."""
EXPORT_PREFIX: Final = "export/"
"""Scope of a guard outside any Dynamo compile: ``export/N`` is the log's N-th exported program."""

_SYMBOL: Final = re.compile(r"\b[a-z]+\d+\b")
_TORCH_FILE: Final = re.compile(r"[/\\]torch[/\\]")


@dataclass(frozen=True, slots=True)
class ShapeGuard:
    """One guard, read from its record(s).

    Attributes:
        scope: Dynamo compile id, or ``export/N`` outside Dynamo.
        expr: The guard expression (``Eq(s17, s77)``).
        symbol_sources: ``symbol=source`` for each symbol of ``expr`` whose source the log names.
        user_frame: ``file:line in function`` of the innermost user frame, ``""`` when the log names none.
        code: The source line of that frame.
        record: The record kind(s) it was read from.
        ts: When it was written.
    """

    scope: str
    expr: str
    symbol_sources: tuple[str, ...]
    user_frame: str
    code: str
    record: str
    ts: datetime | None


class ShapeGuardReader:
    """Feed it every record whose kind is in :data:`SHAPE_RECORDS`; it returns the guards it completed."""

    def __init__(self) -> None:
        self._files: dict[int, str] = {}
        self._symbols: dict[str, dict[str, str]] = {}
        self._exports = 0
        self._pending: ShapeGuard | None = None

    def feed(self, env: Envelope, name: str) -> list[ShapeGuard]:
        """Consume one record; returns the guards it completed (zero, one or two)."""
        body: Any = env.body
        scope = env.compile_id or f"{EXPORT_PREFIX}{self._exports}"
        if name == "str":
            if isinstance(body, list) and len(body) == 2 and isinstance(body[1], int):
                self._files[body[1]] = str(body[0])
            return []
        if not isinstance(body, Mapping):
            return []
        if name in ("create_symbol", "create_unbacked_symbol"):
            if body.get("symbol") and body.get("source"):
                self._symbols.setdefault(scope, {})[str(body["symbol"])] = str(body["source"])
            return []
        if name == "exported_program":
            self._symbols.pop(scope, None)
            self._exports += 1
            return []
        if not body.get("expr"):
            return []
        guard = self._guard(env, name, scope, body)
        pending, self._pending = self._pending, None
        if name == "guard_added":
            self._pending = guard  # its guard_added_fast follows
            return [pending] if pending is not None else []
        if pending is not None and (pending.scope, pending.expr) == (guard.scope, guard.expr):
            if pending.user_frame:
                return [replace(pending, record="guard_added")]
            return [replace(pending, user_frame=guard.user_frame, code=guard.code, record="guard_added")]
        return [g for g in (pending, guard) if g is not None]

    def finish(self) -> list[ShapeGuard]:
        """The guard still waiting for its pair, if any."""
        pending, self._pending = self._pending, None
        return [pending] if pending is not None else []

    def _guard(self, env: Envelope, name: str, scope: str, body: Mapping[str, Any]) -> ShapeGuard:
        expr = str(body["expr"])
        named = body.get("symbol_to_sources")
        known = {str(k): str(v) for k, v in named.items()} if isinstance(named, Mapping) else {}
        known = {**self._symbols.get(scope, {}), **known}
        symbols = dict.fromkeys(_SYMBOL.findall(expr))
        sources = tuple(f"{s}={known[s]}" for s in symbols if s in known)
        frame = self._user_frame(body.get("user_stack"))
        if frame is None and name == "guard_added_fast":
            # Outside Dynamo (non-strict export) the user stack is empty; the full stack still holds the
            # user's frames: the innermost one outside torch is where the guard came from.
            frame = self._user_frame(body.get("stack"), skip_torch=True)
        where, code = frame if frame is not None else ("", "")
        return ShapeGuard(scope, expr, sources, where, code, name, env.ts)

    def _user_frame(self, stack: Any, *, skip_torch: bool = False) -> tuple[str, str] | None:
        if not isinstance(stack, list):
            return None
        for frame in reversed(stack):
            if not isinstance(frame, Mapping):
                continue
            ref = frame.get("filename")
            path = self._files.get(ref, "") if isinstance(ref, int) else str(ref or "")
            if not path or (skip_torch and (path.startswith("<") or _TORCH_FILE.search(path))):
                continue
            return f"{path}:{frame.get('line', '')} in {frame.get('name', '')}", str(frame.get("loc") or "")
        return None
