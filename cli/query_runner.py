"""The named-query runner of the commands that read reports and lists (``report weekly``, ``canary compare``,
``requests``): a running collector service (``--service``, required while the service owns an embedded store) or
an existing local store (``--dsn``), its errors one line each.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from inferensics.cli.errors import fail
from inferensics.cli.store_paths import existing_store

if TYPE_CHECKING:
    from inferensics.collector.client import ServiceError


@contextlib.contextmanager
def query_runner(dsn: str | None, data_dir: Path | None, service: str | None, token: str | None) -> Iterator[object]:
    """A named-query runner over the service (``--service``) or an existing store (``--dsn``, never created
    here: these commands only read it); errors become one line."""
    from inferensics.analytics.errors import AnalyticsError
    from inferensics.analytics.local_runner import LocalRunner
    from inferensics.collector.client import ServiceClient, ServiceError
    from inferensics.schema.store import Store, StoreError

    try:
        if service:
            with ServiceClient(service, token=token, timeout=300) as client:
                yield client
        else:
            with Store.open(existing_store(dsn, data_dir)) as store:
                if store.schema_version() == 0:
                    fail(f"store {store.dsn} is not initialised: run `inferensics init`")
                yield LocalRunner(store)
    except (StoreError, AnalyticsError) as exc:
        fail(str(exc))
    except ServiceError as exc:
        fail(service_line(exc))
    except ValidationError as exc:
        fail("; ".join(f"{'.'.join(map(str, e['loc'])) or 'parameters'}: {e['msg']}" for e in exc.errors()[:3]))


def service_line(exc: ServiceError) -> str:
    """The line a failed call to the service gives (:attr:`ServiceError.line
    <inferensics.collector.client.ServiceError.line>`, the dashboard's too): a refused request (400) in the
    service's own words, other failures as the client says them."""
    return exc.line


def store_text(runner: object) -> str:
    """The store ``runner`` reads, as the service's status names it (:class:`~inferensics.schema.dsn.Dsn`'s text,
    a password masked): the key of its folder of reports (:func:`~inferensics.analytics.report.store_folder`)."""
    from inferensics.analytics.local_runner import LocalRunner
    from inferensics.collector.client import ServiceClient, ServiceError

    if isinstance(runner, LocalRunner):
        return str(runner.client.dsn)  # type: ignore[attr-defined]
    if not isinstance(runner, ServiceClient):
        raise TypeError(f"not a query runner: {type(runner).__name__}")
    try:
        store = runner.status().get("store") or {}
    except ServiceError as exc:
        fail(service_line(exc))
    if not store.get("dsn"):
        fail(f"the service did not say which store it owns ({store.get('error') or 'its status names none'}): pass "
             "--out DIR to say where the report goes")  # fmt: skip
    return str(store["dsn"])


def undecodable(value: str) -> str | None:
    """``value`` as it can be shown when it is not UTF-8 text (an argument's bytes that do not decode reach Python as
    lone surrogates, which no query can carry: each shows as ``\\xNN``); ``None`` when it is text.

    >>> undecodable("h1") is None
    True
    >>> print(undecodable("m\\udcff"))
    m\\xff
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None
