"""Named analytics queries and admin SQL, answered as Arrow IPC streams.

Named queries are handed to the service by the command that starts it (``inferensics serve`` gives it
``inferensics.analytics.registry.NAMED_QUERIES``; the collector never imports analytics): each has a pydantic
parameter model and a ``run`` that takes a query client (the store) and the validated parameters and returns
a Polars frame.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from pydantic import BaseModel, ValidationError

from inferensics.collector.service.sql_guard import SqlRefusedError, check_read_only
from inferensics.collector.service.state import StoreUnavailableError
from inferensics.schema.store import error_line

if TYPE_CHECKING:
    from inferensics.collector.service.state import ServiceState


class QueryError(Exception):
    """A query request that cannot be answered: ``status`` 400, 404, 500 or 503 (the store is unavailable)
    with a message for the caller."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def unavailable(exc: Exception) -> str:
    """The answer to a query while the store cannot be opened: why, and that the service keeps trying."""
    return f"the store is unavailable: {exc}; the service keeps retrying, ask again shortly"


NO_QUERIES: Final = "this service was started without named queries: start it with `inferensics serve`"


def registry(state: ServiceState) -> Mapping[str, Any]:
    """The named queries the command that started the service handed it (none: an empty mapping)."""
    return state.named_queries or {}


def describe(state: ServiceState) -> dict[str, Any]:
    """Names, descriptions and JSON schemas of the parameters of every named query.

    Raises:
        QueryError: 500 naming a query that cannot be described (its parameters have no JSON schema).
    """
    out = {}
    for name, q in sorted(registry(state).items()):
        try:
            params: type[BaseModel] = q.params
            out[name] = {"description": q.description, "parameters": params.model_json_schema()}
        except Exception as exc:  # a query the starting command handed over broken: the service's fault
            raise QueryError(500, f"the named query {name} cannot be described: {error_line(exc)}") from None
    return {"queries": out}


def to_ipc(table: pa.Table) -> bytes:
    """An Arrow table as IPC stream bytes."""
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def run_named(state: ServiceState, name: str, params: object) -> bytes:
    """Validate ``params`` against the query's model, run it on the store, return Arrow IPC."""
    queries = registry(state)
    query = queries.get(name)
    if query is None:
        known = f"known: {sorted(queries)}" if queries else NO_QUERIES
        raise QueryError(404, f"unknown query {name!r}; {known}")
    if not isinstance(params, dict):
        raise QueryError(400, "parameters must be a JSON object")
    where = lone_surrogate(params)
    if where is not None:
        raise QueryError(400, f"bad parameters for {name}: {where} is not valid UTF-8 text (a lone surrogate)")
    try:
        parsed = query.params.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'parameters'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise QueryError(400, f"bad parameters for {name}: {problems}") from None
    check_times(name, parsed)
    try:
        with state.query_lock:
            store = state.query_store()
            try:
                frame = query.run(store, parsed)
            except Exception:
                # A query the engine stopped midway leaves chDB's session a broken answer for the next
                # statement (as in run_sql); a plain query in between clears it.
                with contextlib.suppress(Exception):
                    store.client.command("SELECT 1")
                raise
    except StoreUnavailableError as exc:
        raise QueryError(503, unavailable(exc)) from None
    except ValueError as exc:  # AnalyticsError subclasses ValueError: a bad filter value
        raise QueryError(400, f"{name}: {exc}") from None
    except Exception as exc:
        raise QueryError(500, f"{name} failed: {error_line(exc)}") from None
    return to_ipc(frame.to_arrow())


def lone_surrogate(value: object, path: str = "") -> str | None:
    """Where in a decoded JSON value a string holds a lone UTF-16 surrogate (JSON's ``"\\udcff"``), else ``None``.

    Such a string is valid JSON but no UTF-8 text: the engine's binding cannot take it (it failed a query with a
    500 about casting to a C++ type). ``path`` is the dotted key path, ``parameters`` at the top level."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "parameters"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            where = lone_surrogate(key, f"{path}.{key!a}" if path else "a parameter name")
            if where is None:
                where = lone_surrogate(item, f"{path}.{key}" if path else str(key))
            if where is not None:
                return where
    elif isinstance(value, list):
        for i, item in enumerate(value):
            where = lone_surrogate(item, f"{path or 'parameters'}.{i}")
            if where is not None:
                return where
    return None


TIME_RANGE: Final = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2106, 2, 7, 6, 28, 15, tzinfo=UTC))
"""The times every time column holds: rollups keep ``DateTime`` (seconds since 1970 in 32 bits), raw rows
``DateTime64(6)`` (1900-2299); a named query's time parameters must fall in both."""


def check_times(name: str, params: BaseModel) -> None:
    """Refuse (400) a time parameter outside :data:`TIME_RANGE` (the engine would fail on it: a 500)."""
    low, high = TIME_RANGE
    for field, value in params:
        if not isinstance(value, datetime):
            continue
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        if not low <= when <= high:
            raise QueryError(
                400,
                f"bad parameters for {name}: {field} {value.isoformat()} is outside the times the store holds "
                f"({low.isoformat()} to {high.isoformat()})",
            )


_OWN_FORMAT: Final = re.compile(r"\bFORMAT\s+[A-Za-z][A-Za-z0-9]*\s*;?\s*$", re.IGNORECASE)
_APPENDED: Final = re.compile(r"\bFORMAT\b|\(Arrow\)|: Arrow\b")
"""What of the driver's appended ``FORMAT Arrow`` an engine error quotes when the query read into it."""


def run_sql(state: ServiceState, text: str) -> bytes:
    """Run admin SQL on the read-only, limited session; engine errors become 400 with their message."""
    if not text.strip():
        raise QueryError(400, "empty SQL")
    try:
        check_read_only(text)
    except SqlRefusedError as exc:
        raise QueryError(400, f"refused: {exc}") from None
    if _OWN_FORMAT.search(text):
        # The driver appends FORMAT Arrow; the engine's error would point at that, not at the user's clause.
        raise QueryError(400, "leave out the FORMAT clause: the SQL endpoint answers in Arrow IPC (stream)")
    with state.sql_lock:
        try:
            client = state.sql_store().client
        except StoreUnavailableError as exc:
            raise QueryError(503, unavailable(exc)) from None
        try:
            table = client.query_arrow(text, use_strings=True)
        except Exception as exc:
            # After a query the engine stopped midway (the result-row limit), chDB's session hands the next
            # Arrow query a broken answer ("Invalid flatbuffers message"); a plain query in between clears it.
            with contextlib.suppress(Exception):
                client.command("SELECT 1")
            line = error_line(exc, 500)
            if _APPENDED.search(line) and not re.search(r"\bformat\b|\barrow\b", text, re.IGNORECASE):
                # An unfinished query reads on into the clause the driver appends: say so, or the engine's
                # message (an unknown FORMAT identifier, a syntax error at "Arrow") points at text never sent.
                raise QueryError(
                    400,
                    "query failed: the SQL ends before the statement does (the engine read on into the "
                    f"FORMAT Arrow clause this endpoint appends); complete it. Engine: {line}",
                ) from None
            raise QueryError(400, f"query failed: {line}") from None
    return to_ipc(table)
