"""The running service's parts, built once from the configuration and shared by the handlers."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inferensics.collector.service.auth import TokenAuth
from inferensics.collector.service.config import ServiceConfig
from inferensics.collector.service.engine_decoder import EngineDecoder
from inferensics.collector.service.ingest import Ingest
from inferensics.collector.service.metrics import Metrics
from inferensics.collector.service.spool import ENGINE_DIR, Spool, SpoolDirError
from inferensics.collector.service.writer import PROBE_EVERY_S, Faults, StoreWriter
from inferensics.schema.dsn import DsnError, resolve_dsn
from inferensics.schema.store import Store, StoreError

log = logging.getLogger("inferensics.collector.service")


class StoreUnavailableError(StoreError):
    """The store cannot be opened or migrated now (the service keeps retrying): the API answers 503."""


class StartError(RuntimeError):
    """The service cannot start: its spool directory cannot be used or is another service's, or another process
    holds its embedded store. The message says which and what to do."""


@dataclass
class ServiceState:
    """Spool, writer, query stores, auth and metrics of one service process."""

    config: ServiceConfig
    spool: Spool
    writer: StoreWriter
    metrics: Metrics
    auth: TokenAuth
    ingest: Ingest
    faults: Faults
    open_store: Callable[[], Store]
    named_queries: Mapping[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)
    _query_store: Store | None = None
    _sql_store: Store | None = None
    query_lock: threading.Lock = field(default_factory=threading.Lock)
    sql_lock: threading.Lock = field(default_factory=threading.Lock)

    def query_store(self) -> Store:
        """The store client the query and blob API use (its own client: one session per purpose).

        Opened only once the writer has opened and migrated the store: a store that was down at start-up
        and has come back has no tables until then, and every query would fail on a missing table.

        Raises:
            StoreUnavailableError: the store cannot be opened or migrated (the writer's last error).
        """
        if self._query_store is None:
            self._query_store = self._open_migrated()
        return self._query_store

    def _open_migrated(self) -> Store:
        if self.writer.connect() is None:
            raise StoreUnavailableError(self.writer.last_error or "the store is not open yet")
        try:
            return self.open_store()
        except StoreError as exc:
            raise StoreUnavailableError(str(exc)) from exc

    def sql_store(self) -> Store:
        """A client whose session is read-only with row, time and memory limits (admin SQL only).

        chDB keeps ``SET`` per client session, so the limits are set first and ``readonly = 1`` last:
        after it no query can change a setting or write.
        """
        if self._sql_store is None:
            store = self._open_migrated()
            c = self.config
            for name, value in (
                ("max_result_rows", c.sql_max_rows),
                ("result_overflow_mode", "'throw'"),
                ("max_execution_time", c.sql_max_seconds),
                ("max_memory_usage", c.sql_max_memory),
                ("allow_ddl", 0),
                ("allow_introspection_functions", 0),
                ("readonly", 1),
            ):
                store.client.command(f"SET {name} = {value}")
            self._sql_store = store
        return self._sql_store

    def store_ok(self) -> bool:
        """Whether the writer's last contact with the store (an insert, or its probe while idle) succeeded."""
        return self.writer.store_ok

    def close(self) -> None:
        """Stop the writer and seal the open segment (it is replayed on the next start)."""
        self.writer.stop()
        self.ingest.close()
        self.spool.close()
        for s in (self._query_store, self._sql_store, self.writer.store):
            if s is not None:
                s.close()


def build_state(
    config: ServiceConfig,
    *,
    open_store: Callable[[], Store] | None = None,
    named_queries: Mapping[str, Any] | None = None,
    start_writer: bool = True,
) -> ServiceState:
    """Create the spool (recovering what a previous run left, locked against other processes), the writer
    thread and the handlers.

    A store that cannot be opened is waited for (the writer retries; ingest acknowledges into the spool), except
    an embedded one that another process holds: that is another service's store, and this one refuses to start.

    Raises:
        StartError: the spool directory cannot be used or another process's spool holds it, the store's schema is
            newer than this release's, or another process holds the embedded store (checked when ``open_store`` is
            not given: the store is ``config.dsn``'s).
    """
    metrics = Metrics()
    try:
        spool = Spool(
            config.resolved_spool_dir(),
            max_bytes=config.spool_max_bytes,
            seal_rows=config.batch_max_rows,
            seal_bytes=config.batch_max_bytes,
            seal_age_s=config.batch_max_age_s,
            exclusive=True,
        )
    except SpoolDirError as exc:
        raise StartError(str(exc)) from None
    try:
        opener = open_store or (lambda: Store.open(config.dsn or None))
        faults = Faults()
        decoder = EngineDecoder(
            config.resolved_spool_dir() / ENGINE_DIR,
            {"max_threads": config.engine_max_threads} if config.engine_max_threads else None,
            parse_files=config.engine_parse_files,
        )
        writer = StoreWriter(spool, opener, metrics, faults, decoder=decoder)
        if start_writer and writer.connect(quiet=True) is None:
            if writer.store_newer:  # a store a later release migrated: this release must not write (nor spool) for it
                raise StartError(writer.last_error)
            held = _held_by_another_process(config.dsn) if open_store is None else None
            if held is not None:
                raise StartError(
                    f"another process holds the embedded store {held} (chDB lets one process open it; another "
                    "`inferensics serve` on it?): stop that process, or serve another store with --dsn"
                )
            log.warning("%s", writer.last_error)  # waited for: the writer retries
        ingest = Ingest(config, spool, metrics, lambda: writer.store_ok)
    except BaseException:
        spool.close()
        raise
    state = ServiceState(
        config=config,
        spool=spool,
        writer=writer,
        metrics=metrics,
        auth=TokenAuth(config.tokens, enabled=config.auth),
        ingest=ingest,
        faults=faults,
        open_store=opener,
        named_queries=named_queries,
    )
    metrics.gauge("spool_bytes", "Bytes in spool segment files.", lambda: float(spool.bytes))
    metrics.gauge("spool_files", "Spool segment files (open and sealed).", lambda: float(spool.files()))
    metrics.gauge(
        "spool_max_bytes",
        "The spool's cap (setting spool_max_bytes): above it ingest answers 429 or 503.",
        lambda: float(spool.max_bytes),
    )
    metrics.gauge(
        "store_up",
        f"1 while the store answers: the writer's last insert, or its probe (SELECT 1 every {PROBE_EVERY_S:g} s "
        "while it has nothing to write), succeeded.",
        lambda: float(writer.store_ok),
    )
    if start_writer:
        writer.start()
    return state


def _held_by_another_process(dsn: str) -> str | None:
    """The data directory of the embedded store ``dsn`` names when another process holds it (chDB keeps an
    ``flock`` on its ``status`` file while it has the directory open), else ``None``.

    Asked only after this process failed to open the store: a process that holds it itself would see its own lock.
    """
    try:
        parsed = resolve_dsn(dsn or None)
    except DsnError:
        return None
    if parsed.kind != "chdb" or parsed.path is None:
        return None
    try:
        fd = os.open(parsed.path / "status", os.O_RDONLY)
    except OSError:
        return None  # no engine ever opened it: nobody holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return str(parsed.path)
    finally:
        os.close(fd)  # releases the shared lock if it was taken
    return None
