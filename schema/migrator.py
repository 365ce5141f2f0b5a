"""Applying the migrations to a store, and what a migration that fails half-way leaves behind.

Each migration not yet recorded in ``schema_migrations`` runs in turn and is recorded once all its statements
ran. A migration that raises is not recorded, and before the error goes up the store is put back in a state the
release that wrote it can keep using: the materialized views it had when the migration began are there again
(a migration drops the views that feed the rollups before it rebuilds them; without them the previous release
keeps writing raw rows while its rollups stop filling), and a half-filled copy of a table is dropped. What
the migration already changed stays (every step is idempotent), so running it again completes it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from inferensics.schema.ddl import Target
from inferensics.schema.migrations import (
    COPY_SUFFIXES,
    MIGRATIONS,
    KeepTtl,
    Step,
    engine_full_query,
    fresh_checksum,
    fresh_schema,
    migrations_table_sql,
    view_statements,
)

__all__ = [
    "MIGRATIONS",
    "MigrationFailedError",
    "apply_migrations",
    "create_fresh",
    "keep_ttl",
    "recorded_version",
    "ttl_clause",
]

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

log = logging.getLogger(__name__)


class MigrationFailedError(Exception):
    """Migration ``version`` (``name``) raised ``cause``; the store is recorded at ``left_at``. ``unrestored``
    names the views that fed the store before and could not be put back (empty when all are in place)."""

    def __init__(self, version: int, name: str, left_at: int, cause: BaseException, unrestored: list[str]) -> None:
        super().__init__(f"migration {version} ({name}) failed: {cause}")
        self.version = version
        self.name = name
        self.left_at = left_at
        self.cause = cause
        self.unrestored = unrestored


def recorded_version(client: Client, database: str) -> int:
    """The highest version recorded in ``schema_migrations``, 0 where that table is missing or empty."""
    exists = client.query(
        "SELECT count() FROM system.tables WHERE database = {db:String} AND name = 'schema_migrations'",
        parameters={"db": database},
    ).result_rows[0][0]
    if not exists:
        return 0
    rows = client.query(f"SELECT max(version) FROM {database}.schema_migrations").result_rows
    return int(rows[0][0] or 0)


def apply_migrations(client: Client, target: Target, *, fresh_in_one_pass: bool = True) -> int:
    """Apply every migration not yet recorded, in order; return the version reached.

    A database that holds no table yet (``fresh_in_one_pass``) gets the current schema in one pass instead: see
    :func:`create_fresh`.

    Raises:
        MigrationFailedError: a statement failed; the store was put back as described in the module's docstring.
    """
    client.command(migrations_table_sql(target))
    current = recorded_version(client, target.database)
    if fresh_in_one_pass and current == 0 and _tables(client, target.database) == {"schema_migrations"}:
        return create_fresh(client, target)
    for m in MIGRATIONS:
        if m.version <= current:
            continue
        views, tables = _views(client, target.database), _tables(client, target.database)
        try:
            for stmt in m.statements(target):
                _run(client, stmt)
            client.insert(
                f"{target.database}.schema_migrations",
                [[m.version, m.name, m.checksum(target), datetime.now(UTC)]],
                column_names=["version", "name", "checksum", "applied_at"],
            )
        except Exception as exc:
            unrestored = _put_back(client, target, views, tables)
            raise MigrationFailedError(m.version, m.name, current, exc, unrestored) from exc
        current = m.version
    return current


def create_fresh(client: Client, target: Target) -> int:
    """Create the latest schema in a database that holds no table yet (:func:`~inferensics.schema.migrations.
    fresh_schema`) and record every version with the checksum of what ran; return the latest version.

    The models render today's tables, which already hold what every later migration reaches: their checks, copies
    and view rebuilds would find nothing to do. On a cluster this spares the distributed DDL queue a round for each
    of their statements.

    Raises:
        MigrationFailedError: a statement failed (reported as migration 1's); nothing is recorded, so the next run
            applies every migration in turn over what was created (each statement is idempotent).
    """
    first = MIGRATIONS[0]
    try:
        for stmt in fresh_schema(target):
            client.command(stmt)
        checksum, now = fresh_checksum(target), datetime.now(UTC)
        client.insert(
            f"{target.database}.schema_migrations",
            [[m.version, m.name, checksum, now] for m in MIGRATIONS],
            column_names=["version", "name", "checksum", "applied_at"],
        )
    except Exception as exc:
        raise MigrationFailedError(first.version, first.name, 0, exc, []) from exc
    return MIGRATIONS[-1].version


def _run(client: Client, stmt: str | Step | KeepTtl) -> None:
    if isinstance(stmt, KeepTtl):
        keep_ttl(client, stmt)
        return
    if isinstance(stmt, Step) and not client.query(stmt.when).result_rows[0][0]:
        return
    client.command(str(stmt))


def keep_ttl(client: Client, step: KeepTtl) -> None:
    """Give ``step.dest`` the TTL ``step.source`` has now (``MODIFY TTL``), or none where it has none (``REMOVE
    TTL``); nothing where they agree, where the source's is one the schema replaces (``step.replaced``), where
    ``step.when`` answers zero, or where either table is missing."""
    if step.when is not None and not client.query(step.when).result_rows[0][0]:
        return
    source = client.query(engine_full_query(step.database, step.source)).result_rows
    dest = client.query(engine_full_query(step.database, step.dest)).result_rows
    if not source or not dest:
        return
    want, have = ttl_clause(str(source[0][0])), ttl_clause(str(dest[0][0]))
    if want == have or (want and want in step.replaced):  # the schema's TTL, or an earlier one it replaces
        return
    table = f"{step.database}.{step.dest}{step.on_cluster}"
    client.command(f"ALTER TABLE {table} MODIFY TTL {want}" if want else f"ALTER TABLE {table} REMOVE TTL")
    log.info("kept the TTL of %s.%s on its copy %s: %s", step.database, step.source, step.dest, want or "none")


_ENDS_TTL: Final = ("SETTINGS", "COMMENT")
"""The clauses that may follow a table's TTL in ``engine_full`` or ``create_table_query``."""


def ttl_clause(engine: str) -> str:
    """The TTL expressions of a table's ``engine_full`` (or ``create_table_query``) as ClickHouse formats it,
    ``""`` where it has none: the text between the ``TTL`` keyword and the ``SETTINGS`` (or ``COMMENT``) that follows,
    each found outside quotes and brackets (a string or a column may hold those words)."""
    start = end = -1
    depth, quote, i = 0, "", 0
    while i < len(engine):
        ch = engine[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'`\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and (i == 0 or engine[i - 1] == " "):
            word = engine[i:].split(" ", 1)[0]
            if start < 0 and word == "TTL":
                start = i + len(word)
            elif start >= 0 and word in _ENDS_TTL:
                end = i
                break
        i += 1
    if start < 0:
        return ""
    return engine[start : end if end >= 0 else len(engine)].strip()


def _views(client: Client, database: str) -> dict[str, str]:
    rows = client.query(
        "SELECT name, create_table_query FROM system.tables WHERE database = {db:String} "
        "AND engine = 'MaterializedView'",
        parameters={"db": database},
    ).result_rows
    return {str(name): str(query) for name, query in rows}


def _tables(client: Client, database: str) -> set[str]:
    rows = client.query(
        "SELECT name FROM system.tables WHERE database = {db:String}", parameters={"db": database}
    ).result_rows
    return {str(name) for (name,) in rows}


def _put_back(client: Client, target: Target, views: dict[str, str], tables: set[str]) -> list[str]:
    """Drop the copies the failed migration made, recreate the views it dropped; return the views that could not
    be recreated. Never raises: the migration's own error is the one to report."""
    db, on = target.database, target.on_cluster
    for _ in range(2):  # chDB's client can answer the query after a failed one with what is left of the error
        try:
            client.query("SELECT 1")
            break
        except Exception:
            continue
    try:
        now = _tables(client, db)
    except Exception:  # the store went away: nothing can be put back, nor checked
        return sorted(views)
    for name in sorted(now - tables):
        if name.removesuffix("_local").endswith(COPY_SUFFIXES):
            try:
                client.command(f"DROP TABLE IF EXISTS {db}.{name}{on} SYNC")
            except Exception as exc:
                log.warning("could not drop the copy %s.%s a failed migration left: %s", db, name, exc)
    unrestored: list[str] = []
    for name, query in sorted(views.items()):
        if name in now:
            continue
        # The view as it was; where its table has already changed form, the view as this release defines it.
        as_it_was: list[str | Step] = [query.replace(f"VIEW {db}.{name}", f"VIEW {db}.{name}{on}", 1)]
        attempts = [as_it_was, view_statements(target, name)]
        for statements in attempts:
            if not statements:  # a view this release does not define
                continue
            try:
                for stmt in statements:
                    _run(client, stmt)
                break
            except Exception as exc:
                log.warning("could not recreate the view %s.%s: %s", db, name, exc)
        else:
            unrestored.append(name)
    return unrestored
