"""Everything the pages ask of the collector service: cached named queries, blobs, health, error panel.

The dashboard never opens the store (ARCHITECTURE decision 1): every number comes from a named query of the
service, answered as Arrow and read into Polars here. Answers are cached per session settings and
parameters for a short time, so moving between pages does not repeat slow queries.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Final, cast

import polars as pl
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.collector.service_url import TOKEN_ENV
from inferensics.dashboard._internal.settings import (
    CACHE_TTL_ENV,
    DEFAULT_CACHE_TTL_S,
    DashboardSettings,
    current_settings,
)

_TTL: Final = int(os.environ.get(CACHE_TTL_ENV, "") or DEFAULT_CACHE_TTL_S)


# A client dropped from the cache (a ninth service or token, or a cache clear) is closed: left to the garbage
# collector, its pooled keep-alive socket leaks until collected (a ResourceWarning). The cache drops the least
# recently used client and each query takes its client afresh, so a client still in use is closed only if eight
# other services or tokens are asked for while its request is in flight.
@st.cache_resource(show_spinner=False, max_entries=8, on_release=ServiceClient.close)
def _client(url: str, token: str | None) -> ServiceClient:
    return ServiceClient(url, token=token or "", timeout=120)


def client() -> ServiceClient:
    """The service client for this session's settings (shared across reruns)."""
    settings = current_settings()
    return _client(settings.service_url, settings.token)


@st.cache_data(ttl=_TTL, show_spinner=False, max_entries=256)
def _query(url: str, token: str | None, name: str, params_json: str) -> pl.DataFrame:
    return _client(url, token).query(name, **json.loads(params_json))


def _body(params: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in params.items() if v is not None}, sort_keys=True, default=_json_value)


QueryCall = tuple[str, Mapping[str, Any]]
"""A named query of the service and its parameters."""


def _start(settings: DashboardSettings, calls: Sequence[QueryCall], *, health: bool) -> Callable[[], list[object]]:
    """Start ``calls`` (and the health check) at once, each in its own thread; returns a function that waits
    for them and gives per call its answer or its error."""
    ctx = get_script_run_ctx()
    jobs: list[Callable[[], object]] = [
        functools.partial(_query, settings.service_url, settings.token, name, _body(params)) for name, params in calls
    ]
    if health:
        jobs.append(functools.partial(_health, settings.service_url, settings.token))
    results: list[object] = [None] * len(jobs)

    def one(i: int) -> None:
        try:
            results[i] = jobs[i]()
        # Handed back: fetch_queries raises it, prefetch leaves it to the next call. BaseException too: a
        # thread that outlives its script run (prefetch without waiting, then st.stop) gets Streamlit's
        # stop signal, which must not surface as an unhandled thread exception.
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(jobs))]
    for thread in threads:
        add_script_run_ctx(thread, ctx)
        thread.start()

    def wait() -> list[object]:
        for thread in threads:
            thread.join()
        return results

    return wait


def prefetch(*calls: QueryCall, health: bool = False, wait: bool = True) -> None:
    """Ask the service for several named queries (and, with ``health``, its health) at once, so that the
    calls that follow find their answers cached instead of waiting for each in turn.

    With ``wait=False`` it returns at once: a later call with the same arguments waits for the answer in
    flight (Streamlit's cache holds one lock per key) instead of asking again, so the run can draw what needs
    no answer meanwhile. Failures are left for the later calls to raise (an exception is not cached, so such
    a call repeats the request and shows the error panel).
    """
    waiting = _start(current_settings(), calls, health=health)
    if wait:
        waiting()


def fetch_queries(what: str, calls: Mapping[str, QueryCall]) -> dict[str, pl.DataFrame]:
    """Several named queries at once under one spinner saying ``what`` is loading; answers by the keys of
    ``calls``.

    Raises:
        ServiceError: the first failed call in the order of ``calls`` (see :func:`run_query`).
    """
    with st.spinner(f"Loading {what}…"):
        results = _start(current_settings(), list(calls.values()), health=False)()
    answers: dict[str, pl.DataFrame] = {}
    for key, result in zip(calls, results, strict=True):
        if isinstance(result, BaseException):
            raise result
        answers[key] = cast(pl.DataFrame, result)
    return answers


def run_query(name: str, what: str, **params: Any) -> pl.DataFrame:
    """Run the named query ``name`` with a spinner saying ``what`` is loading.

    Raises:
        ServiceError: the service is unreachable, refused the token, or rejected the parameters;
            :func:`service_errors` turns it into an error panel.
    """
    settings = current_settings()
    body = _body(params)
    with st.spinner(f"Loading {what}…"):
        return _query(settings.service_url, settings.token, name, body)


def _json_value(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def said(exc: ServiceError) -> str:
    """What the service said, in its own words: no method, path, HTTP status or query name in front. The client
    takes a refused query's name off (:meth:`ServiceClient.query`), so a refusal (400) reads here as the command
    line says it (:attr:`ServiceError.line <inferensics.collector.client.ServiceError.line>`); nothing more is cut:
    a message that opens with a word and a colon keeps that word."""
    return exc.detail


def section_query(name: str, what: str, **params: Any) -> pl.DataFrame | None:
    """:func:`run_query` for one section of a page: a rejected request (400/404: a filter that does not
    apply, an unknown value) becomes a warning in that section and ``None``; other failures propagate.

    A value the sidebar offers is a value of the fleet's requests, which analytics accepts in every query
    (``check_filter_values``): a model that never broke a graph gets an empty graph-break section."""
    try:
        return run_query(name, what, **params)
    except ServiceError as exc:
        if exc.status in (400, 404, 422):
            st.warning(f"**{what.capitalize()}:** {said(exc)}", icon=":material/warning:")
            return None
        raise


@st.cache_data(ttl=60, show_spinner=False, max_entries=8)
def _store(url: str, token: str | None) -> str:
    store: dict[str, Any] = _client(url, token).status().get("store") or {}
    if not store.get("dsn"):
        why = store.get("error") or store.get("last_error") or "its status names no store"
        raise ServiceError(f"the service at {url} did not say which store it owns: {why}", 503)
    return str(store["dsn"])


def store_dsn() -> str:
    """The DSN of the store the service owns (``GET /api/v1/status``; a password is masked), cached a minute.

    Raises:
        ServiceError: the service is unreachable, refused the token, or could not open its store.
    """
    settings = current_settings()
    return _store(settings.service_url, settings.token)


@st.cache_data(ttl=3600, show_spinner=False, max_entries=64)
def _blob(url: str, token: str | None, sha256: str) -> bytes:
    return _client(url, token).get_blob(sha256)


def fetch_blob(sha256: str, what: str) -> bytes:
    """A blob's bytes (verified against its digest by the client), cached: blobs never change."""
    settings = current_settings()
    with st.spinner(f"Loading {what}…"):
        return _blob(settings.service_url, settings.token, sha256)


@st.cache_data(ttl=10, show_spinner=False, max_entries=8)
def _health(url: str, token: str | None) -> dict[str, Any]:
    service = _client(url, token)
    # The query list needs a read token, so one call shows an unreachable service and a wrong token alike (and
    # that it is alive); /readyz (no token) then says whether the store is up: two requests.
    queries = service.queries()
    try:
        # Through the client, so an HTTPS service's CA file ($INFERENSICS_CA_FILE) holds for this call too.
        ready = {"alive": True, **service.ready()}
    except ValueError as exc:  # /readyz answered something other than JSON
        raise ServiceError(f"cannot reach the inferensics service at {url}: {exc}") from None
    return {**ready, "queries": sorted(queries)}


def check_service() -> dict[str, Any]:
    """Liveness, readiness and the named queries the service offers; raises :class:`ServiceError`."""
    settings = current_settings()
    return _health(settings.service_url, settings.token)


def error_panel(exc: ServiceError) -> None:
    """Show one clear panel for a failed service call: what is wrong and what to do, never a traceback."""
    settings = current_settings()
    if exc.status is None:
        st.error(
            f"**Cannot reach the inferensics service** at `{settings.service_url}`.\n\n"
            "Start it with `inferensics serve` (or `inferensics serve --with-dashboard`), or point the "
            "dashboard at the right address with `inferensics dashboard --service URL`.",
            icon=":material/cloud_off:",
        )
    elif exc.status in (401, 403):
        verb = "refused the token" if exc.status == 401 else "does not allow this token to read"
        st.error(
            f"**The service {verb}** at `{settings.service_url}`.\n\n"
            f"Pass a token with the `read` role: `inferensics dashboard --token T` or `${TOKEN_ENV}`.",
            icon=":material/lock:",
        )
    elif exc.status < 500:
        st.warning(f"**The service rejected the request:** {said(exc)}", icon=":material/warning:")
        return
    else:
        st.error(f"**The service failed to answer:** {exc.message}", icon=":material/error:")
    with st.expander("Details"):
        st.code(exc.message, language=None)


@contextlib.contextmanager
def service_errors() -> Iterator[None]:
    """Run a page body; a :class:`ServiceError` becomes :func:`error_panel` and stops the page."""
    try:
        yield
    except ServiceError as exc:
        error_panel(exc)
        st.stop()


def token_fingerprint(token: str | None) -> str:
    """A short, non-reversible label of the token for the sidebar (never the token itself)."""
    if not token:
        return "none"
    return hashlib.sha256(token.encode()).hexdigest()[:8]
