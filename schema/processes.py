"""Which serving process a compile-side row came from, so that one compile is stored once.

A process's compiles reach the store by two roads: live, through the host SDK's trace sink, and later from
the process's ``TORCH_TRACE`` log through ``inferensics import-trace``. A log also grows while its process
runs, and may be imported again. Both roads stamp the rows of a compile (compiles, recompiles, guard
failures, graph breaks, shape guards, cache lookups, kernel decisions) with the process's key in
``attrs[PROCESS_ATTR]``; an import skips every compile whose id that process already has stored.

A log read before a compile ended stores that compile ``incomplete`` (``outcome``); when the log, read again,
holds its end, the import replaces what it stored of it: its compile, recompile, graph-break, kernel-decision
and shape-guard rows are deleted and stored again from the longer log, and of its cache lookups (counted by the
``cache_events_1h`` rollup as they arrived) only those past the ones stored are added.

A live key is made by the tracker and written into the process's trace log, so an import of that log finds
it there; a log of an uninstrumented process is keyed by its file name (``TORCH_TRACE`` makes one per
process), its process id and the time of its first record.
Dynamo's compile ids (``0/1``) are unique within a process, so ``(process key, compile id)`` names one
compile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from inferensics.schema import columns as col

if TYPE_CHECKING:
    from inferensics.schema.ddl import Target

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
INCOMPLETE: Final = "incomplete"
"""``kind`` of a compile stored from a log that ended before it did (``outcome`` ``incomplete``, imported): a
longer copy of the log that holds its end replaces it. Also that ``outcome``."""
REPLACED_TABLES: Final = ("compiles", "recompiles", "graph_breaks", "kernel_decisions")
"""Tables whose rows of an incomplete compile are replaced by the rows of the log that completes it (beside
``shape_guards``, whose rows name a compile id without its :data:`COMPILE_SEQ_ATTR`)."""
_PROCESS_IN: Final = f"{col.ATTRS}['{PROCESS_ATTR}'] IN {{processes:Array(String)}}"
_KEY: Final = f"concat({col.COMPILE_ID}, '#', {col.ATTRS}['{COMPILE_SEQ_ATTR}'])"


def recorded_compiles_sql(database: str) -> str:
    """What the processes with keys ``{processes:Array(String)}`` have stored: columns ``kind``
    (:data:`COMPILES`, :data:`INCOMPLETE` or :data:`SHAPE_GUARDS`), ``compile_id`` and ``seq``
    (:data:`COMPILE_SEQ_ATTR`, ``""`` for a first use of the id; always ``""`` for shape guards)."""
    where = f"WHERE {_PROCESS_IN}"
    incomplete = f"{col.OUTCOME} = '{INCOMPLETE}' AND {col.SOURCE} = 'trace'"
    return (
        f"SELECT DISTINCT if({incomplete}, '{INCOMPLETE}', '{COMPILES}') AS kind, {col.COMPILE_ID}, "
        f"{col.ATTRS}['{COMPILE_SEQ_ATTR}'] AS seq FROM {database}.compiles {where} "
        f"UNION ALL SELECT DISTINCT '{SHAPE_GUARDS}' AS kind, {col.COMPILE_ID}, '' AS seq "
        f"FROM {database}.shape_guards {where}"
    )


def compile_key(compile_id: str, seq: str) -> str:
    """One compile of a process as the ``{compiles:Array(String)}`` parameter of the statements below name it."""
    return f"{compile_id}#{seq}"


def stored_cache_lookups_sql(database: str) -> str:
    """How many cache lookups the processes ``{processes:Array(String)}`` stored for each of the compiles
    ``{compiles:Array(String)}`` (:func:`compile_key`): columns ``compile_id``, ``seq``, ``n``."""
    return (
        f"SELECT {col.COMPILE_ID}, {col.ATTRS}['{COMPILE_SEQ_ATTR}'] AS seq, count() AS n "
        f"FROM {database}.cache_events WHERE {_PROCESS_IN} AND {_KEY} IN {{compiles:Array(String)}} "
        f"GROUP BY {col.COMPILE_ID}, seq"
    )


def forget_compile_rows_sql(target: Target, table: str, *, incomplete_only: bool = False) -> str:
    """Delete the rows of ``table`` (one of :data:`REPLACED_TABLES`) that the processes
    ``{processes:Array(String)}`` stored of the compiles ``{compiles:Array(String)}`` (:func:`compile_key`);
    with ``incomplete_only`` (``compiles``) only their :data:`INCOMPLETE` rows."""
    only = f" AND {col.OUTCOME} = '{INCOMPLETE}'" if incomplete_only else ""
    return (
        f"DELETE FROM {target.database}.{target.local(table)}{target.on_cluster} "
        f"WHERE {_PROCESS_IN} AND {_KEY} IN {{compiles:Array(String)}}{only}"
    )


def forget_shape_guards_sql(target: Target) -> str:
    """Delete the imported shape guards the processes ``{processes:Array(String)}`` stored of the compile ids
    ``{compile_ids:Array(String)}``."""
    return (
        f"DELETE FROM {target.database}.{target.local('shape_guards')}{target.on_cluster} "
        f"WHERE {_PROCESS_IN} AND {col.COMPILE_ID} IN {{compile_ids:Array(String)}} AND {col.SOURCE} = 'trace'"
    )
