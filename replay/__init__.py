"""Replay: re-execute a failing request and name the fault (category, op, user line, kernel).

The in-process API (:func:`investigate`) compiles with the compiler as it stands at the call and runs
the ladder; the pack and the CLI (``inferensics replay``) wrap it.
"""

from inferensics.replay._internal.executor import replay_pack
from inferensics.replay._internal.investigate import investigate
from inferensics.replay._internal.pack import ReplayError, ReplayPack, read_pack, write_pack
from inferensics.replay._internal.tolerance import RATIO_LIMIT, Comparison, compare
from inferensics.replay._internal.verdict import CATEGORIES, Verdict

__all__ = [
    "CATEGORIES",
    "RATIO_LIMIT",
    "Comparison",
    "ReplayError",
    "ReplayPack",
    "Verdict",
    "compare",
    "investigate",
    "read_pack",
    "replay_pack",
    "write_pack",
]
