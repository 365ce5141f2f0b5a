"""Spooled OTLP requests → typed rows in the store, decoded by the engine rather than by Python.

Per sealed segment the writer hands the records' protobuf bytes here. They are written as one length-delimited
file that the engine reads with its ``Protobuf`` format and the schema rendered from opentelemetry-proto
(:mod:`inferensics.collector.service.otlp_proto`); the SQL of :mod:`inferensics.collector.service.otlp_sql`
flattens spans and span events into records, pivots each table's records into columns with a reject reason per
row, and the good rows are inserted with the token ``<segment>:<table>``. Three in-memory staging tables
(``_ingest_records``; ``_ingest_unique``, made only when the segment holds spans already stored or repeated;
``_ingest_rows``; in the store's database, dropped after each segment) keep the parse and the pivot to one pass
each. A server's ingest user needs ``CREATE TABLE, DROP TABLE`` on each (deploy/clickhouse/users.d/inferensics.xml;
tests/deploy/test_clickhouse_config.py reads the names from this module).

The embedded store reads the file with ``file()``. A ClickHouse server cannot read our disk, so the bytes
are sent as the data of ``INSERT ... SELECT ... FROM input(...) FORMAT Protobuf`` and the server must have
the rendered ``.proto`` in its ``format_schema_path`` (``python -m inferensics.collector.service --write-proto DIR``);
that path has not been run against a server here.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from inferensics.collector.service.capture_index import CAPTURE_COLUMNS, markers_insert_sql
from inferensics.collector.service.otlp_proto import PROTO_FILE, format_schema, structure, write_proto
from inferensics.collector.service.otlp_sql import (
    API_ONLY_TABLE,
    DUPLICATE_KEY,
    DUPLICATES,
    MAX_MAP_ENTRIES,
    MAX_TEXT_CHARS,
    OUT_OF_RANGE_TIME,
    REJECT,
    SPAN_KEY,
    SPAN_SECOND,
    TOO_MANY_ENTRIES,
    TRUNCATED_VALUE,
    UNSUPPORTED,
    UNSUPPORTED_VALUE,
    api_only_text,
    dropped_sql,
    insert_columns_sql,
    known_names,
    names_sql,
    out_of_range_code,
    records_sql,
    reject_messages,
    rows_sql,
)
from inferensics.schema.dedup import KEY, SECOND, SEEN_TABLE
from inferensics.schema.events import MODELS_BY_TABLE
from inferensics.schema.otlp import API_ONLY_MODELS, span_name
from inferensics.schema.store import Store, StoreError, error_line

log = logging.getLogger("inferensics.collector.service")

RECORDS: Final = "_ingest_records"
UNIQUE: Final = "_ingest_unique"
ROWS: Final = "_ingest_rows"
MAX_MESSAGES: Final = 10
"""Messages a segment lists (its warning is one log line); those past it are counted in one more."""
STAGING_BLOCK_ROWS: Final = 4096


@dataclass
class SegmentResult:
    """What one segment gave: rows sent and landed, rejections by reason, what senders' SDKs dropped, messages."""

    sent: int = 0
    landed: int = 0
    duplicate_spans: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    messages: list[str] = field(default_factory=list)
    """Why rows were rejected or changed, one message per reason and table with its rows, at most
    :data:`MAX_MESSAGES`; then one saying how many reasons more, and their rows."""
    more_notes: int = 0
    """Messages past :data:`MAX_MESSAGES`, counted in the last message."""
    more_rows: int = 0
    """Rows those messages were about."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each stage (``STAGES``): where a segment's time goes."""


STAGES: Final = ("parse", "dedup_lookup", "pivot", "insert", "dedup_keys")
"""The decoder's stages, as timed in :attr:`SegmentResult.seconds`: parse the requests into the staging
table, look up the spans' dedup keys, pivot records into rows (with checks and counts), insert the rows,
insert the keys."""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def canonical(payloads: list[bytes]) -> list[bytes]:
    """Each request re-encoded as opentelemetry-proto reads it, without the fields it does not know.

    The parser that ingest checks a body with keeps a field of the wrong wire type (or an unknown one) as an
    unknown field, as protobuf requires; the engine's Protobuf reader refuses some of them and fails the
    whole file. Re-encoding gives the engine the message every sender's SDK would have written.
    """
    out = []
    for payload in payloads:
        message = ExportTraceServiceRequest.FromString(payload)
        message.DiscardUnknownFields()
        out.append(message.SerializeToString())
    return out


def delimited(payloads: list[bytes]) -> bytes:
    """Messages as the engine's ``Protobuf`` format reads them: each preceded by its varint length."""
    return b"".join(_varint(len(p)) + p for p in payloads)


def write_delimited(path: Path, payloads: list[bytes]) -> None:
    """:func:`delimited` written to ``path`` without joining the messages in memory first (a segment is tens
    of MB: the copies held the interpreter lock that ingest needs to answer)."""
    with path.open("wb") as f:
        for p in payloads:
            f.write(_varint(len(p)))
            f.write(p)


class EngineDecoder:
    """Inserts spooled segments through the engine's Protobuf decoder.

    Args:
        work_dir: Where the schema and the per-segment input files live (the embedded engine reads them).
        insert_settings: Extra engine settings for the decode and insert queries (tuning).
        parse_files: Files a segment is split into so that the engine parses them in parallel.
    """

    def __init__(
        self,
        work_dir: Path,
        insert_settings: dict[str, Any] | None = None,
        parse_files: int = 2,
        *,
        now_us: Callable[[], int] | None = None,
    ) -> None:
        self.work_dir = work_dir
        self.parse_files = parse_files
        self.proto = write_proto(work_dir)
        self.insert_settings = dict(insert_settings or {})
        self.now_us = now_us
        """The clock of the rows' time window in microseconds (``None``: the engine's); tests inject one."""
        self._known = set(known_names())
        self._api_only = {span_name(m) for m in API_ONLY_MODELS}
        # Where a segment's input files go when the work directory's filesystem refuses them (the spool's
        # own disk full: the writer must still drain it).
        self._fallback = Path(tempfile.gettempdir()) / f"inferensics-engine-{os.getpid()}"

    def _settings(self, store: Store) -> dict[str, Any]:
        schema = format_schema(self.proto if store.dsn.kind == "chdb" else PROTO_FILE)
        return {
            "format_schema": schema,
            "input_format_protobuf_oneof_presence": 1,
            # the reject reason is one multiIf over every check: evaluating all of them is cheaper
            "short_circuit_function_evaluation": "disable",
            # the staging tables are filled by as many streams as the segment has files (parse and pivot
            # then run on that many threads); the final insert overrides this with one stream
            "max_insert_threads": self.parse_files,
            # staging blocks of a few thousand rows, so that the pivot reads the records table in as many
            # streams as there are threads (one block of the whole segment was read by one thread)
            "max_block_size": STAGING_BLOCK_ROWS,
            "min_insert_block_size_rows": STAGING_BLOCK_ROWS,
            "min_insert_block_size_bytes": 0,
            **self.insert_settings,
        }

    def stage(self, store: Store, name: str, payloads: list[bytes]) -> None:
        """Parse a segment's requests into the records staging table."""
        db = store.database
        settings = self._settings(store)
        client = store.client
        if store.dsn.kind == "chdb":
            # one file per parsing thread: the engine parses the files of a glob in parallel
            parts = max(1, min(self.parse_files, len(payloads)))
            # Files of an earlier staging of this segment (a process killed while staging it) would be
            # read by the glob with this one's: their rows would land twice if the split changed since.
            for folder in (self.work_dir, self._fallback):
                for stale in folder.glob(f"{glob_escape(name)}.*.pb"):
                    stale.unlink(missing_ok=True)
            folder = self.work_dir
            paths = [folder / f"{name}.{i}.pb" for i in range(parts)]
            try:
                for i, path in enumerate(paths):
                    write_delimited(path, payloads[i::parts])
            except OSError as exc:
                for path in paths:
                    path.unlink(missing_ok=True)
                log.warning("cannot write engine input in %s (%s); using %s", folder, exc.strerror, self._fallback)
                folder = self._fallback
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                paths = [folder / f"{name}.{i}.pb" for i in range(parts)]
                for i, path in enumerate(paths):
                    write_delimited(path, payloads[i::parts])
            try:
                glob = _escape(str(folder / f"{name}.*.pb"))
                source = f"file('{glob}', 'Protobuf', '{_escape(structure())}')"
                client.command(f"CREATE OR REPLACE TABLE {db}.{RECORDS} ENGINE = Memory AS {records_sql(source)}",
                               settings=settings)  # fmt: skip
            finally:
                for path in paths:
                    path.unlink(missing_ok=True)
            return
        source = f"input('{_escape(structure())}')"
        client.command(f"CREATE OR REPLACE TABLE {db}.{RECORDS} ENGINE = Memory EMPTY AS "
                       f"{records_sql(_empty_source())}", settings=settings)  # fmt: skip
        client.command(f"INSERT INTO {db}.{RECORDS} {records_sql(source)} FORMAT Protobuf",
                       data=delimited(payloads), settings=settings)  # fmt: skip

    def insert(
        self,
        store: Store,
        name: str,
        payloads: list[bytes],
        *,
        possibly_seen: bool,
        before_insert: Any = None,
    ) -> SegmentResult:
        """Decode and insert one segment's requests; every table with the token ``<name>:<table>``.

        ``possibly_seen`` (a replayed or retried segment) counts the table before and after each insert so
        that rows the engine dropped as duplicates are told apart. ``before_insert`` is called before each
        insert (the test-only fault hook raises there). When the engine refuses the requests' Protobuf as sent,
        they are re-encoded by :func:`canonical` and read once more.

        Raises:
            StoreError, clickhouse_connect errors: the engine failed; the caller retries the segment.
        """
        out = SegmentResult()
        db = store.database
        client = store.client
        settings = self._settings(store)
        clock = time.perf_counter()

        def lap(stage: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            out.seconds[stage] = out.seconds.get(stage, 0.0) + now - clock
            clock = now

        try:
            self.stage(store, name, payloads)
        except Exception as exc:
            # Only a refusal of the Protobuf input is worth a re-encode; anything else (the store) is retried.
            if "protobuf" not in str(exc).lower():
                raise
            fixed = canonical(payloads)
            if fixed == payloads:
                raise
            _note(out, f"the engine could not read the requests as sent ({error_line(exc, 120)}); "
                       "re-encoded them without unknown fields")  # fmt: skip
            self.stage(store, name, fixed)
        lap("parse")
        try:
            records = self._unique(store, out, settings)
            lap("dedup_lookup")
            attributes, events = client.query(dropped_sql(records)).result_rows[0]
            out.dropped["sdk_attributes"] += int(attributes or 0)
            out.dropped["sdk_events"] += int(events or 0)
            names = client.query(names_sql(records)).result_rows
            now_us = self.now_us() if self.now_us is not None else None
            for span, spans, events in sorted((str(a), int(b), int(c)) for a, b, c in names):
                n = spans + events
                if span not in self._known:
                    out.rejected["unknown_table"] += n
                    _note(out, f"{n} span(s) or event(s) named {span!r}: no table of that name", rows=n)
                    continue
                if span in self._api_only:  # blobs come in only through the blob API (schema/otlp.py)
                    out.rejected[API_ONLY_TABLE] += n
                    _note(out, f"{n} span(s) or event(s) named {span!r}: {api_only_text(span)}", rows=n)
                    continue
                model = MODELS_BY_TABLE[span.split(".", 1)[1]]
                table = model.TABLE.name
                pivot = rows_sql(model, records, spans=spans > 0, events=events > 0, now_us=now_us)
                # settings inline: the client applies per-call settings with a query per SET and per restore
                client.command(f"CREATE OR REPLACE TABLE {db}.{ROWS} ENGINE = Memory AS {pivot}{_inline(settings)}")
                late = out_of_range_code(model)
                select, cut, over = insert_columns_sql(model)
                # every reason with its rows (a reason is a code: the table's checks, a few dozen at most)
                capture = CAPTURE_COLUMNS.get(model)
                counts = (
                    f"countIf({REJECT} = 0), countIf({REJECT} != 0), countIf({REJECT} = {late}), "
                    f"sumMapIf([{REJECT}], [toUInt64(1)], {REJECT} != 0), sumIf({cut}, {REJECT} = 0), "
                    f"sumIf({over}, {REJECT} = 0), sumIf({UNSUPPORTED}, {REJECT} = 0), "
                    f"sumIf({DUPLICATES}, {REJECT} = 0), "
                    + (f"countIf({REJECT} = 0 AND {capture} != '')" if capture else "0")
                )
                row = client.query(f"SELECT {counts} FROM {db}.{ROWS}").result_rows[0]
                good, bad, oor, reasons, cuts, entries, unsupported, duplicates, captures = row
                lap("pivot")
                if cuts:
                    out.dropped[TRUNCATED_VALUE] += int(cuts)
                    _note(out, f"{span}: {int(cuts)} string value(s) longer than {MAX_TEXT_CHARS} characters cut")
                if entries:
                    out.dropped[TOO_MANY_ENTRIES] += int(entries)
                    _note(out, f"{span}: {int(entries)} map entries past {MAX_MAP_ENTRIES} a row dropped")
                if unsupported:
                    out.dropped[UNSUPPORTED_VALUE] += int(unsupported)
                    _note(out, f"{span}: {int(unsupported)} attribute(s) whose value is a kvlist or nested array "
                               "dropped (send them as strings, e.g. JSON text)")  # fmt: skip
                if duplicates:
                    out.dropped[DUPLICATE_KEY] += int(duplicates)
                    _note(out, f"{span}: {int(duplicates)} attribute(s) whose key the span or event already had "
                               "dropped (OTLP forbids duplicate keys; the first is kept)")  # fmt: skip
                if bad:
                    if int(bad) - int(oor):
                        out.rejected["invalid_row"] += int(bad) - int(oor)
                    if oor:
                        out.rejected[OUT_OF_RANGE_TIME] += int(oor)
                    messages = reject_messages(model)
                    codes, rows = reasons
                    # the reasons that refused the most rows first: the messages past the cap are only counted
                    for code, n in sorted(zip(map(int, codes), map(int, rows), strict=True), key=_most_rows):
                        _note(out, f"{span}: {messages[code - 1]} ({_rows(n)})", rows=n)
                if not good:
                    continue
                if before_insert is not None:
                    before_insert()
                if captures:
                    # before the rows: a request row is never stored without its marker (a crash in between
                    # replays the segment, and a marker alone only refuses a blob to a token without replay)
                    marker_settings = {**self.insert_settings, "async_insert": 0, "insert_deduplicate": 1,
                                       "insert_deduplication_token": f"{name}:{table}:captures"}  # fmt: skip
                    client.command(markers_insert_sql(db, model, f"{db}.{ROWS}", f"{REJECT} = 0",
                                                      _inline(marker_settings)))  # fmt: skip
                columns = ", ".join(model.model_fields)
                before = _count(store, table) if possibly_seen else 0
                insert = {
                    **self.insert_settings,
                    "async_insert": 0,
                    "parallel_view_processing": 1,
                    "insert_deduplicate": 1,
                    "insert_deduplication_token": f"{name}:{table}",
                    "deduplicate_blocks_in_dependent_materialized_views": 1,
                    # one block per table and segment, so a replay forms the same deduplicated block
                    "min_insert_block_size_rows": 1 << 40,
                    "min_insert_block_size_bytes": 1 << 40,
                    "max_insert_threads": 1,
                    "max_block_size": 1 << 30,
                }
                # the cutting select list only when a value is over the limit (it copies every string)
                select = select if cuts or entries else columns
                client.command(f"INSERT INTO {db}.{table} ({columns}){_inline(insert)} "
                               f"SELECT {select} FROM {db}.{ROWS} WHERE {REJECT} = 0")  # fmt: skip
                landed = _count(store, table) - before if possibly_seen else int(good)
                out.sent += int(good)
                out.landed += landed
                lap("insert")
            # the keys after the rows: a crash in between replays the segment, whose rows the tokens drop
            seen = {
                "insert_deduplicate": 1,
                "insert_deduplication_token": f"{name}:{SEEN_TABLE}",
                "async_insert": 0,
                # a Distributed key table (cluster) must have the keys on the shards before the next lookup
                "distributed_foreground_insert": 1,
            }
            client.command(f"INSERT INTO {db}.{SEEN_TABLE} ({SECOND}, {KEY}){_inline(seen)} "
                           f"SELECT {SPAN_SECOND}, {SPAN_KEY} FROM {records}")  # fmt: skip
            lap("dedup_keys")
            if out.more_notes:
                rows = f" ({_rows(out.more_rows)})" if out.more_rows else ""
                out.messages.append(f"and {out.more_notes} more reason{'s' * (out.more_notes != 1)}{rows}")
        finally:
            for t in (ROWS, UNIQUE, RECORDS):
                try:
                    client.command(f"DROP TABLE IF EXISTS {db}.{t}")
                except Exception as exc:  # the store may be gone; the next segment replaces the tables
                    log.debug("dropping %s failed: %s", t, exc)
        return out

    def _unique(self, store: Store, out: SegmentResult, settings: dict[str, Any]) -> str:
        """The staged spans less those already stored (a retried request) or repeated within the segment.

        One query counts both; only when there are some is a filtered copy made (a retry is the rare case).
        Returns the table the rest of the segment reads.
        """
        db, client = store.database, store.client
        staged = f"{db}.{RECORDS}"
        pairs = f"({SPAN_SECOND}, {SPAN_KEY})"
        stored = (
            f"SELECT {SECOND}, {KEY} FROM {db}.{SEEN_TABLE} "
            # GLOBAL: on a cluster the key table is Distributed and the staged spans are on this node only
            f"WHERE ({SECOND}, {KEY}) GLOBAL IN (SELECT {SPAN_SECOND}, {SPAN_KEY} FROM {staged})"
        )
        n, unique, known = client.query(
            f"SELECT count(), uniqExact({SPAN_KEY}), (SELECT count() FROM ({stored})) FROM {staged}"
        ).result_rows[0]
        if not known and unique == n:
            return staged
        client.command(
            f"CREATE OR REPLACE TABLE {db}.{UNIQUE} ENGINE = Memory AS SELECT * FROM {staged} "
            f"WHERE {pairs} NOT IN ({stored}) LIMIT 1 BY {SPAN_KEY}{_inline(settings)}"
        )
        kept = int(client.query(f"SELECT count() FROM {db}.{UNIQUE}").result_rows[0][0])
        out.duplicate_spans += int(n) - kept
        return f"{db}.{UNIQUE}"


def _note(out: SegmentResult, message: str, *, rows: int = 0) -> None:
    """Add ``message`` (about ``rows`` rejected rows) to the segment's, or count it past :data:`MAX_MESSAGES`."""
    if len(out.messages) < MAX_MESSAGES:
        out.messages.append(message)
    else:
        out.more_notes += 1
        out.more_rows += rows


def _rows(n: int) -> str:
    return f"{n} row{'s' * (n != 1)}"


def _most_rows(reason: tuple[int, int]) -> tuple[int, int]:
    code, n = reason
    return -n, code


def _inline(settings: dict[str, Any]) -> str:
    """A ``SETTINGS`` clause (one query instead of the client's SET and restore per setting)."""

    def literal(v: Any) -> str:
        return str(int(v)) if isinstance(v, bool | int) else f"'{_escape(str(v))}'"

    return " SETTINGS " + ", ".join(f"{k} = {literal(v)}" for k, v in settings.items()) if settings else ""


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _empty_source() -> str:
    # a source with the request structure and no rows, to create the staging table on a server
    return f"(SELECT * FROM format(Protobuf, '{_escape(structure())}', '') LIMIT 0)"


def _count(store: Store, table: str) -> int:
    rows = store.query_rows(f"SELECT count() FROM {store.database}.{table}")
    return int(rows[0][0])


__all__ = ["EngineDecoder", "SegmentResult", "StoreError", "delimited"]
