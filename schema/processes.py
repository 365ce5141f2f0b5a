"""Which serving process a compile-side row came from, so that one compile is stored once.

A process's compiles reach the store by two roads: live, through the host SDK's trace sink, and later from
the process's ``TORCH_TRACE`` log through ``inferensics import-trace``. A log also grows while its process
runs, and may be imported again. Both roads stamp the rows of a compile (compiles, recompiles, guard
failures, graph breaks, shape guards, cache lookups, kernel decisions) with the process's key in
``attrs[PROCESS_ATTR]``; an import skips every compile whose id that process already has stored.

A live key is made by the tracker and written into the process's trace log, so an import of that log finds
it there; a log of an uninstrumented process is keyed by its file name (``TORCH_TRACE`` makes one per
process), its process id and the time of its first record.
Dynamo's compile ids (``0/1``) are unique within a process, so ``(process key, compile id)`` names one
compile.
"""

from __future__ import annotations

from typing import Final

from inferensics.schema import columns as col

PROCESS_ATTR: Final = "process"
"""``attrs`` key of a compile-side row: the key of the process that compiled it."""
COMPILE_SEQ_ATTR: Final = "compile_seq"
"""``attrs`` key of a compile-side row whose compile id the process used before (after
``torch._dynamo.reset()``): how many compiles had that id before it. Absent on the first."""
COMPILES: Final = "compiles"
"""``kind`` of a recorded compile in :func:`recorded_compiles_sql`."""
SHAPE_GUARDS: Final = "shape_guards"
"""``kind`` of a compile whose shape guards are stored (the host SDK keeps a live compile's guards as a blob,
so its compile rows do not say whether its guard rows are stored)."""


def recorded_compiles_sql(database: str) -> str:
    """What the processes with keys ``{processes:Array(String)}`` have stored: columns ``kind``
    (:data:`COMPILES` or :data:`SHAPE_GUARDS`), ``compile_id`` and ``seq`` (:data:`COMPILE_SEQ_ATTR`, ``""``
    for a first use of the id; always ``""`` for shape guards)."""
    where = f"WHERE {col.ATTRS}['{PROCESS_ATTR}'] IN {{processes:Array(String)}}"
    return (
        f"SELECT DISTINCT '{COMPILES}' AS kind, {col.COMPILE_ID}, {col.ATTRS}['{COMPILE_SEQ_ATTR}'] AS seq "
        f"FROM {database}.compiles {where} "
        f"UNION ALL SELECT DISTINCT '{SHAPE_GUARDS}' AS kind, {col.COMPILE_ID}, '' AS seq "
        f"FROM {database}.shape_guards {where}"
    )
