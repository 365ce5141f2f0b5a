"""The store: one clickhouse-connect client over chDB (embedded) or a ClickHouse server.

Everything that reads or writes ClickHouse goes through :class:`Store`: typed batch inserts from Arrow,
Polars or validated events, and parameterized queries only (values travel as ``{name:Type}`` parameters,
never formatted into SQL).

>>> import tempfile
>>> with Store.open(f"chdb://{tempfile.mkdtemp()}") as store:   # doctest: +SKIP
...     store.migrate()
1
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from inferensics.schema import engine_signals
from inferensics.schema.install_hint import pip_install_hint

try:
    import pyarrow as pa
except ModuleNotFoundError as exc:  # the slim install (a serving host's) has no store
    raise ModuleNotFoundError(
        "inferensics.schema.store needs pyarrow and clickhouse-connect, which come with the service extra: "
        + pip_install_hint("service"),
        name=exc.name,
    ) from None

from inferensics.schema.arrow import arrow_to_events, conform, events_to_arrow
from inferensics.schema.ddl import Target
from inferensics.schema.dsn import Dsn, DsnError, resolve_dsn
from inferensics.schema.events import EVENT_MODELS
from inferensics.schema.migrations import LATEST_VERSION, newer_store_text
from inferensics.schema.migrator import MigrationFailedError, apply_migrations, recorded_version
from inferensics.schema.rollups import ROLLUPS
from inferensics.schema.table import Event

if TYPE_CHECKING:
    import polars as pl
    from clickhouse_connect.driver.client import Client

E = TypeVar("E", bound=Event)


def _arrow_file(table: pa.Table) -> pa.Buffer:
    """``table`` as one Arrow IPC file in memory (the ``Arrow`` input format).

    The file is written twice: once to a counting sink for its size (no copy), then into one buffer of
    exactly that size. A growing ``BufferOutputStream`` reallocates and copies as it goes: 15–55 ms for a
    100k-row request batch (25 MB) against 4 ms this way (benchmarks/bench_store_insert.py's batches).
    """
    sizing = pa.MockOutputStream()
    with pa.ipc.new_file(sizing, table.schema) as writer:
        writer.write_table(table)
    out = pa.allocate_buffer(sizing.size())
    with pa.ipc.new_file(pa.FixedSizeBufferWriter(out), table.schema) as writer:
        writer.write_table(table)
    return out


class StoreError(RuntimeError):
    """The store cannot be opened or used; the message is one line that says what to do."""


class StoreNewerError(StoreError):
    """The store's schema is newer than this release's: a later inferensics migrated it, and this one must not
    write to it (the message says what to do)."""


def error_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an engine or driver error (at most ``limit`` characters), else its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


# chDB initialises one embedded server per process: all clients of a process share it.
_CHDB_LOCK = threading.Lock()


def _open_client(dsn: Dsn) -> Client:
    try:
        import clickhouse_connect
    except ModuleNotFoundError as exc:
        raise StoreError(
            f"cannot open store {dsn}: {exc.name} is not installed; it comes with the service extra: "
            + pip_install_hint("service")
        ) from None

    if dsn.kind == "chdb":
        assert dsn.path is not None
        path = dsn.path
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot open store {dsn}: cannot create data directory ({exc.strerror})") from None
        # kept(): loading chDB would otherwise take the process's fatal-signal handling (engine_signals).
        with _CHDB_LOCK, _native_stderr_captured() as captured, engine_signals.kept():
            try:
                boot = clickhouse_connect.get_client(dsn=f"chdb://{path}")
                boot.command(f"CREATE DATABASE IF NOT EXISTS {dsn.database}")
                return clickhouse_connect.get_client(dsn=f"chdb://{path}", database=dsn.database)
            except Exception as exc:  # clickhouse-connect wraps chDB's errors in several types
                failure, native = exc, captured.read_text(errors="replace")
        raise StoreError(_chdb_error(dsn, failure, native)) from None
    # The driver logs a warning of its own before raising; the error below says it in one line.
    driver_log = logging.getLogger("clickhouse_connect")
    level = driver_log.level
    driver_log.setLevel(logging.ERROR)
    try:
        client = clickhouse_connect.get_client(
            host=dsn.host,
            port=dsn.port,
            username=dsn.user,
            password=dsn.password,
            secure=dsn.kind == "https",
            connect_timeout=10,
            # On a cluster an insert into a Distributed table returns once every shard has its rows: a spool
            # segment is deleted only after that, and migrations exchange tables only after their copies
            # are filled (an asynchronous insert would leave them queued on the node it reached).
            settings={"insert_distributed_sync": 1} if dsn.cluster else None,
        )
        # Only when missing: a server's read-only or ingest user may not create databases (CREATE ... IF NOT
        # EXISTS checks the grant before whether the database exists).
        if not client.command(f"EXISTS DATABASE {dsn.database}"):
            client.command(f"CREATE DATABASE IF NOT EXISTS {dsn.database}")
        client.database = dsn.database
        return client
    except Exception as exc:
        raise StoreError(
            f"cannot open store {dsn}: {_root_cause(exc)}; check host, port and credentials, or pass --dsn"
        ) from None
    finally:
        driver_log.setLevel(level)


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a driver error, one line: the socket's own error when there is one
    (``Connection refused``, ``Name or service not known``, a TLS failure), else the server's message.

    clickhouse-connect wraps urllib3's retry error, which wraps the connection error, which wraps the
    ``OSError``; each layer repeats the one inside with a pool description and a query id around it.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return str(current.strerror)
        current = current.__cause__ or current.__context__
    return error_line(exc)


@contextlib.contextmanager
def _native_stderr_captured() -> Iterator[Path]:
    """Capture what the engine's C++ side writes to fd 2 while opening, so a failure is one line.

    chDB reports the real cause (e.g. ``Cannot lock file <dir>/status``) on stderr and raises a generic
    ``Error initializing EmbeddedServer``; the captured text lets the error name the cause.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stderr"
        sys.stderr.flush()
        saved = os.dup(2)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.dup2(fd, 2)
            yield out
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(fd)


def _held_by_another_process(path: Path) -> bool:
    status = path / "status"
    if not status.exists():
        return False
    with status.open("rb") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def _chdb_error(dsn: Dsn, exc: Exception, native: str = "") -> str:
    text = f"{exc}\n{native}"
    assert dsn.path is not None
    if "Cannot lock file" in text or "Another server instance" in text or _held_by_another_process(dsn.path):
        return (
            f"cannot open store {dsn}: another process holds the data directory {dsn.path} "
            "(chDB allows one process per directory); stop that process, or reach the store through "
            "its `inferensics serve` API (--service URL)"
        )
    if "already initialized with path" in text:
        return (
            f"cannot open store {dsn}: this process already opened a different chDB directory; "
            "one process can hold one embedded store"
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"cannot open store {dsn}: {first[:300]}"


class Store:
    """A connection to the inferensics database on one ClickHouse backend."""

    def __init__(self, dsn: Dsn, client: Client) -> None:
        self.dsn = dsn
        self.client = client
        self.database = dsn.database
        if dsn.cluster:
            self.target = Target("cluster", database=dsn.database, cluster=dsn.cluster)
        else:
            self.target = Target("chdb" if dsn.kind == "chdb" else "server", database=dsn.database)

    @classmethod
    def open(cls, dsn: str | Dsn | None = None) -> Store:
        """Open the store named by ``dsn`` (``--dsn``), else ``$INFERENSICS_DSN``, else the default directory.

        Raises:
            StoreError: one line naming the DSN and the cause (a held chDB directory says so).
        """
        try:
            parsed = dsn if isinstance(dsn, Dsn) else resolve_dsn(dsn)
        except DsnError as exc:
            raise StoreError(str(exc)) from None
        return cls(parsed, _open_client(parsed))

    def close(self) -> None:
        """Release the client (the embedded engine stays up until the process exits)."""
        with contextlib.suppress(Exception):
            self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.close()

    # --- schema -------------------------------------------------------------------------------------

    def schema_version(self) -> int:
        """The highest applied migration version, 0 for an empty store."""
        return recorded_version(self.client, self.database)

    def create_if_empty(self) -> int:
        """Create an empty store's tables (what ``inferensics init`` does on a fresh store); a store that has
        a schema is left as it is. Returns the schema version.

        Raises:
            StoreNewerError: the store's schema is newer than this release's, which must not write to it.
        """
        version = self.schema_version()
        if version > LATEST_VERSION:
            raise StoreNewerError(newer_store_text(self.dsn, version))
        return self.migrate() if version == 0 else version

    def migrate(self) -> int:
        """Apply every migration not yet recorded; return the schema version. Idempotent.

        A store already at the latest version runs no DDL at all, so a user without DDL rights (a cluster's
        ingest writer) opens a migrated store; one that is behind gets a :class:`StoreError` saying to run
        ``inferensics init`` as a user that may migrate.

        Raises:
            StoreNewerError: the store's schema is newer than this release's (nothing is run).
            StoreError: reading the store failed, or a migration failed: one line naming the migration, the
                engine's reason, and what was put back (the views that feed the rollups; see
                :mod:`inferensics.schema.migrator`) so that running ``inferensics init`` again completes it.
        """
        try:
            start = self.schema_version()
        except Exception as exc:  # the driver's own (connection, grants) while reading the version
            raise StoreError(f"cannot read the schema version of store {self.dsn}: {error_line(exc)}") from None
        if start > LATEST_VERSION:
            raise StoreNewerError(newer_store_text(self.dsn, start))
        if start == LATEST_VERSION:
            return start
        try:
            return apply_migrations(self.client, self.target)
        except MigrationFailedError as failed:
            raise StoreError(self._migration_failed_text(start, failed)) from None
        except Exception as exc:  # creating the bookkeeping table or reading it
            raise StoreError(self._migration_failed_text(start, exc)) from None

    def _migration_failed_text(self, start: int, failure: Exception) -> str:
        cause = failure.cause if isinstance(failure, MigrationFailedError) else failure
        text = " ".join(str(cause).split())
        if "ACCESS_DENIED" in text:
            # the server's own sentence: "<user>: Not enough privileges. ... the grant X ON Y. (ACCESS_DENIED)"
            reason = text[text.find("DB::Exception: ") + 15 :] if "DB::Exception: " in text else text
            reason = reason[: reason.find("(ACCESS_DENIED)") + len("(ACCESS_DENIED)")]
            return (
                f"store {self.dsn} is at schema version {start}, behind {LATEST_VERSION}, "
                f"and its user may not migrate it ({reason}); run `inferensics init --dsn ...` as the migrating "
                "user (the deployment's schema-migrator job)"
            )
        head = f"cannot migrate store {self.dsn} from schema version {start} to {LATEST_VERSION}"
        if not isinstance(failure, MigrationFailedError):
            return f"{head}: {error_line(cause)}; nothing was recorded: fix the cause and run `inferensics init` again"
        where = f"migration {failure.version} ({failure.name}) failed: {error_line(cause)}"
        if start == 0 and failure.left_at == 0:  # an empty database: no release wrote to it (create_fresh)
            return (
                f"cannot create the schema of store {self.dsn} (version {LATEST_VERSION}): {where}; nothing was "
                "recorded: fix the cause and run `inferensics init` again (it completes the schema over the tables "
                "already created)"
            )
        if failure.unrestored:
            return (
                f"{head}: {where}; the views {', '.join(failure.unrestored)} that fed its rollups could not be "
                "put back: stop every writer and restore the backup taken before the upgrade"
            )
        return (
            f"{head}: {where}; the store stays at version {failure.left_at} with the views that feed its rollups "
            "in place, so the previous release can keep writing to it: fix the cause and run `inferensics init` "
            "again (it completes the migration)"
        )

    def table_names(self) -> list[str]:
        """Names of the event and rollup tables, in creation order."""
        return [m.TABLE.name for m in EVENT_MODELS] + [r.name for r in ROLLUPS]

    def _parts_sum(self, column: str) -> dict[str, int]:
        """``sum(column)`` of the active parts per table; on a cluster over one replica of every shard, the
        shard tables counted under their Distributed names."""
        parts = "system.parts"
        if self.target.backend == "cluster":
            cluster = self.target.cluster
            if cluster.startswith("{"):
                cluster = str(self.client.query(f"SELECT getMacro('{cluster[1:-1]}')").result_rows[0][0])
            parts = f"cluster('{cluster}', system.parts)"
        rows = self.client.query(
            f"SELECT table, sum({column}) FROM {parts} WHERE database = {{db:String}} AND active GROUP BY table",
            parameters={"db": self.database},
        ).result_rows
        return {str(t).removesuffix("_local") if self.target.backend == "cluster" else str(t): int(n) for t, n in rows}

    def row_counts(self) -> dict[str, int]:
        """Rows per table (rollups count their merged-or-not rows) from ``system.parts``: the event and rollup tables,
        then the store's own tables that hold rows (``schema_migrations``, the collector's ``ingest_seen``), so that
        every table :meth:`disk_bytes` sums is listed."""
        counts = self._parts_sum("rows")
        names = self.table_names()
        own = {name: n for name, n in sorted(counts.items()) if name not in names}
        return {**{name: counts.get(name, 0) for name in names}, **own}

    def disk_bytes(self) -> dict[str, int]:
        """Compressed bytes on disk per table."""
        return self._parts_sum("bytes_on_disk")

    def data_dir_bytes(self) -> int | None:
        """Size of the embedded data directory in bytes (``None`` for a server store)."""
        if self.dsn.path is None:
            return None
        return sum(p.stat().st_size for p in Path(self.dsn.path).rglob("*") if p.is_file())

    # --- inserts ------------------------------------------------------------------------------------

    def insert_arrow(self, model: type[Event], table: pa.Table, *, dedup_token: str | None = None) -> int:
        """Insert an Arrow table into ``model``'s table after conforming it to the model's schema.

        ``dedup_token`` makes the insert idempotent: the same token and data inserted again is dropped by
        the engine (the collector's spool replays rely on this). Without a token nothing is deduplicated:
        two equal batches are two batches. Returns the number of rows sent.
        """
        data = conform(model, table, omit_type_defaults=True)
        if data.num_rows == 0:
            return 0
        settings = self._insert_settings(model, dedup_token)
        name = f"{self.database}.{model.TABLE.name}"
        if self.dsn.kind == "chdb":
            # clickhouse-connect's chDB backend writes the payload to a file the engine reads with
            # INSERT ... FROM INFILE; a memoryview of the IPC buffer is written as is, where the Arrow
            # buffer that ``client.insert_arrow`` passes is first copied into Python bytes (the stub
            # types the payload as bytes; the backend takes any bytes-like object).
            payload = cast("bytes", memoryview(_arrow_file(data)))
            self.client.raw_insert(name, data.column_names, payload, settings, "Arrow")
        else:
            self.client.insert_arrow(name, data, settings=settings)
        return int(data.num_rows)

    def _insert_settings(self, model: type[Event], dedup_token: str | None) -> dict[str, Any]:
        """Per-insert settings: one synchronous insert per batch (the callers batch), views in parallel.

        Measured on the request table (benchmarks/bench_store_insert.py): hashing every token-less block
        for the deduplication window, and merging each rollup block on insert (``optimize_on_insert``),
        together cost more engine time than writing the request rows. A token-less insert skips the hash;
        rollup reads aggregate across parts anyway, so their blocks are merged in the background only.
        """
        known = self.client.server_settings
        settings: dict[str, Any] = {"async_insert": 0, "parallel_view_processing": 1}
        if model.TABLE.engine == "MergeTree" and "optimize_on_insert" in known:
            settings["optimize_on_insert"] = 0
        if dedup_token:
            settings["insert_deduplication_token"] = dedup_token
            settings["insert_deduplicate"] = 1
            settings["deduplicate_blocks_in_dependent_materialized_views"] = 1
            if "deduplicate_insert" in known:  # supersedes insert_deduplicate where the engine has it
                settings["deduplicate_insert"] = "enable"
        elif "deduplicate_insert" in known:
            settings["deduplicate_insert"] = "disable"
        else:
            settings["insert_deduplicate"] = 0
        return settings

    def insert_frame(self, model: type[Event], frame: pl.DataFrame, *, dedup_token: str | None = None) -> int:
        """Insert a Polars frame (columns named as the model's fields)."""
        return self.insert_arrow(model, frame.to_arrow(), dedup_token=dedup_token)

    def insert_events(self, events: Sequence[E], *, dedup_token: str | None = None) -> int:
        """Insert validated events of one kind."""
        if not events:
            return 0
        model = type(events[0])
        if any(type(e) is not model for e in events):
            raise TypeError("insert_events takes events of one kind; group them with events_by_model first")
        return self.insert_arrow(model, events_to_arrow(model, events), dedup_token=dedup_token)

    # --- queries ------------------------------------------------------------------------------------

    def query_arrow(self, sql: str, parameters: Mapping[str, Any] | None = None) -> pa.Table:
        """Run a parameterized query and return Arrow (``{name:Type}`` placeholders for every value)."""
        return self.client.query_arrow(sql, parameters=dict(parameters or {}), use_strings=True)

    def query_frame(self, sql: str, parameters: Mapping[str, Any] | None = None) -> pl.DataFrame:
        """Run a parameterized query and return a Polars frame."""
        import polars as pl

        frame = pl.from_arrow(self.query_arrow(sql, parameters))
        assert isinstance(frame, pl.DataFrame)
        return frame

    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a parameterized query and return plain rows."""
        return [tuple(r) for r in self.client.query(sql, parameters=dict(parameters or {})).result_rows]

    def select_events(
        self,
        model: type[E],
        where: str = "1",
        parameters: Mapping[str, Any] | None = None,
        order_by: str = "",
    ) -> list[E]:
        """Read rows of ``model``'s table back as events (``where`` uses ``{name:Type}`` parameters)."""
        names = ", ".join(f"`{n}`" for n in model.model_fields)
        order = f" ORDER BY {order_by}" if order_by else ""
        table = self.query_arrow(
            f"SELECT {names} FROM {self.database}.{model.TABLE.name} WHERE {where}{order}", parameters
        )
        return arrow_to_events(model, table)

    # --- blobs --------------------------------------------------------------------------------------

    def put_blob(
        self,
        data: bytes,
        kind: str,
        *,
        host: str = "",
        media_type: str = "application/octet-stream",
        attrs: Mapping[str, str] | None = None,
    ) -> str:
        """Store ``data`` once under its sha256 and index it; return the hex digest."""
        from inferensics.schema.events import BlobContentEvent, BlobIndexEvent

        digest = hashlib.sha256(data).hexdigest()
        if self.has_blob(digest):
            return digest
        now = datetime.now(UTC)
        self.insert_events([BlobContentEvent(ts=now, sha256=digest, data=data)], dedup_token=f"blob:{digest}")
        index = BlobIndexEvent(
            ts=now,
            sha256=digest,
            size_bytes=len(data),
            kind=kind,
            media_type=media_type,
            host=host,
            attrs=dict(attrs or {}),
        )
        self.insert_events([index], dedup_token=f"blobidx:{digest}")
        return digest

    def has_blob(self, sha256: str) -> bool:
        """Whether a blob with this digest is stored."""
        rows = self.query_rows(
            f"SELECT count() FROM {self.database}.blob_contents WHERE sha256 = {{h:String}}", {"h": sha256}
        )
        return bool(rows[0][0])

    def get_blob(self, sha256: str) -> bytes | None:
        """The blob's bytes, verified against its digest; ``None`` when absent.

        Raises:
            StoreError: the stored bytes do not hash to ``sha256`` (corruption).
        """
        table = self.query_arrow(
            f"SELECT data FROM {self.database}.blob_contents WHERE sha256 = {{h:String}} LIMIT 1", {"h": sha256}
        )
        if table.num_rows == 0:
            return None
        data = bytes(table.column("data").cast(pa.binary())[0].as_py())
        if hashlib.sha256(data).hexdigest() != sha256:
            raise StoreError(f"blob {sha256} is corrupt: its bytes hash to {hashlib.sha256(data).hexdigest()}")
        return data
