"""What a :class:`~inferensics.collector.trace.assembler.CompileAssembler` saw: counts the importer reports
and tests compare with the log, and the one line that says where a log's payloads were damaged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class AssemblyStats:
    """What an assembler saw; the importer reports it and tests compare it with the log."""

    compiles: int = 0
    failures: int = 0
    recompile_limit: int = 0
    recompiles: int = 0
    graph_breaks: int = 0
    cache: Counter[str] = field(default_factory=Counter)
    damaged_payloads: int = 0
    unused: Counter[str] = field(default_factory=Counter)
    """Sound records of kinds no compile record is built from (export programs, timings, graphs), by name."""
    blobs: int = 0
    kernels: int = 0
    """Kernel rows emitted: one per kernel of each distinct output code (an artifact served again by a cache hit
    adds none)."""
    shape_guards: int = 0
    """Symbolic-shape guards stored (``guard_added`` / ``guard_added_fast``; export and Dynamo alike)."""
    first_damaged_payload: int = 0
    """Line of the first record whose payload is damaged (0: none)."""
    cut_off_at: int = 0
    """Line of the record the log ends inside (0: it ends after a whole record): the last record's payload does
    not match its digest, as when the file was cut off inside it or is still being written. It is counted among
    ``damaged_payloads`` too; :func:`damage_note` names it."""
    stale_source_lines: int = 0
    """Kernel source lines dropped because they name a file the compiled graph does not come from (an
    FX-graph-cache hit on a graph first compiled elsewhere, whose kernels the current graph could not map)."""


def damage_note(stats: AssemblyStats) -> str:
    """The damaged payloads an assembler met, in one line (``""``: none): the first one's line, and the record
    the file ends inside when it was cut off there or is still being written."""
    cut = f"the file ends inside a record at line {stats.cut_off_at}: cut off, or still being written"
    first = f"line {stats.first_damaged_payload}: payload does not match its record"
    if stats.cut_off_at:
        return cut if stats.first_damaged_payload == stats.cut_off_at else f"{first}; {cut}"
    return first if stats.first_damaged_payload else ""
