"""Graph breaks as the qualification report names them: where in the user's code, and Dynamo's reason.

A ``dynamo_graph_break_reason`` payload holds Dynamo's message (``Graph break in user code at FILE:LINE``, the
break's type above its ``Explanation:``, its registry id ``GB0124``), the user code traceback, and then the
traceback of Dynamo itself, whose innermost frame is always inside torch (``exc.py`` raising ``Unsupported``).
The user's frame is the innermost one of the user code traceback outside torch and installed packages.
"""

from __future__ import annotations

import os
import re
import sysconfig
from functools import cache
from typing import Final

import torch

_FRAME: Final = re.compile(r'^[ \t]*File "([^"]+)", line (\d+), in (.+)$', re.MULTILINE)
_AT: Final = re.compile(r"Graph break in user code at\s*(\S+?):(\d+)\s*$", re.MULTILINE)
_TYPE_ABOVE_EXPLANATION: Final = re.compile(r"^(.*\S.*)\n[ \t]*Explanation:\s*(.*)$", re.MULTILINE)
_REASON_LINE: Final = re.compile(r"Graph Break Reason:\s*(.+)")
_REGISTRY_ID: Final = re.compile(r"\bgb(\d{4})\b", re.IGNORECASE)
REASON_CHARS: Final = 300
"""Longest reason (and explanation) the report keeps."""


@cache
def _library_roots() -> tuple[str, ...]:
    """Folders whose code is not the user's: torch's own and the installed packages'."""
    paths = sysconfig.get_paths()
    roots = {os.path.dirname(torch.__file__), paths.get("purelib", ""), paths.get("platlib", "")}
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


def is_user_file(path: str) -> bool:
    """Whether ``path`` is the user's code: not torch's, not an installed package's, not Python's own."""
    if path.startswith("<") or "/site-packages/" in path or "/dist-packages/" in path:
        return False
    real = os.path.realpath(path)
    return not real.startswith(_library_roots())


def _where(path: str, line: str) -> str:
    return f"{os.path.basename(path)}:{line}"


def user_frame(payload: str) -> str:
    """``model.py:34``: the innermost frame of the user code traceback in the user's code, else the frame Dynamo's
    first line names when it is the user's, else ``""``."""
    _, found, tail = payload.partition("User code traceback:")
    if found:
        section = tail.split("\nTraceback (most recent call last):", 1)[0]
        frames = [f for f in _FRAME.findall(section) if is_user_file(f[0])]
        if frames:
            return _where(frames[-1][0], frames[-1][1])
    at = _AT.search(payload)
    return _where(at.group(1), at.group(2)) if at and is_user_file(at.group(1)) else ""


def break_record(payload: str) -> dict[str, str]:
    """One report row of a ``dynamo_graph_break_reason`` payload: ``where`` (the user's frame, ``model.py:34``),
    ``reason`` (the break's type as Dynamo gives it: ``Unsupported Tensor.item() call with
    capture_scalar_outputs=False``), ``explanation`` (Dynamo's) and ``registry_id`` (``GB0124``; ``""``: none)."""
    typed = _TYPE_ABOVE_EXPLANATION.search(payload)
    if typed:
        reason = typed.group(1).strip().removeprefix("Graph Break Reason:").strip()
        explanation = typed.group(2).strip()
    else:  # an older message: the "Graph Break Reason:" line, else the first line
        line = _REASON_LINE.search(payload)
        lines = [ln.strip() for ln in payload.splitlines() if ln.strip()]
        reason, explanation = (line.group(1).strip() if line else (lines[0] if lines else "")), ""
    gb = _REGISTRY_ID.search(payload)
    return {
        "where": user_frame(payload),
        "reason": reason[:REASON_CHARS],
        "explanation": explanation[:REASON_CHARS],
        "registry_id": f"GB{gb.group(1)}" if gb else "",
    }


def distinct(records: list[dict[str, str]]) -> list[dict[str, str]]:
    """``records`` with each (where, reason) once, in first-seen order (a recompile breaks at the same place
    again)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for r in records:
        if (r["where"], r["reason"]) not in seen:
            seen.add((r["where"], r["reason"]))
            out.append(r)
    return out
