"""The HTTP application: routes, authentication and error mapping (Starlette, served by uvicorn)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from inferensics.collector.service import queries
from inferensics.collector.service.auth import METRICS, REPLAY, AuthError
from inferensics.collector.service.capture_index import backfill_sql, captured_inputs
from inferensics.collector.service.ingest import error as otlp_error
from inferensics.collector.service.openapi import openapi_document
from inferensics.collector.service.state import ServiceState, StoreUnavailableError
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import StoreError, error_line

ARROW_STREAM = "application/vnd.apache.arrow.stream"
Handler = Callable[[Request], Awaitable[Response]]

log = logging.getLogger("inferensics.collector.service")

REPLAY_BLOB_WHY: Final = (
    "this blob is a request's captured inputs (tenant data), which only a token with the 'replay' role (or admin) "
    "may read: give the token the replay role ($INFERENSICS_TOKENS: token=read+replay)"
)
BLOB_KIND: Final = re.compile(r"[a-z0-9][a-z0-9_.:-]{0,63}")
"""A blob's ``kind`` as stored, after case folding: a short name (``inputs``, ``output_code``, ``bundle``)."""
MEDIA_TYPE: Final = re.compile(r"[\x21-\x7e][\x20-\x7e]{0,254}")
"""A blob's ``media_type``: printable ASCII, at most 255 characters."""
BAD_BLOB: Final = "bad_blob_kind"
"""The ``rejected`` reason of a blob upload whose ``kind`` or ``media_type`` is not a short name."""
BAD_QUERY: Final = "bad_query"
"""The ``rejected`` reason of a named query refused with 400 or 404 (no such query, parameters that do not fit);
the named-query routes (the listing too) count their 500s in ``query_errors``."""
SQL_REFUSED: Final = "sql_refused"
"""The ``rejected`` reason of admin SQL refused with 400 (not read-only, not UTF-8, or the engine refused it)."""
REFUSAL_LOG_EVERY_S: Final = 60.0
"""A refused token is logged once per client, path and reason in this many seconds (with how many since)."""


class RefusalLog:
    """Logs refused requests (a wrong or missing token, a role the token lacks) without flooding: the first of
    each ``(client, path, reason)`` at once, then at most one line a :data:`REFUSAL_LOG_EVERY_S` with the count
    since the last line. A host exporting with a bad token is seen in the service's log, not only in a metric."""

    def __init__(self, every_s: float = REFUSAL_LOG_EVERY_S) -> None:
        self.every_s = every_s
        self._seen: dict[tuple[str, str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def refused(self, client: str, path: str, status: int, reason: str) -> None:
        key = (client, path, reason)
        now = time.monotonic()
        with self._lock:
            last, count = self._seen.get(key, (-self.every_s, 0))
            count += 1
            due = now - last >= self.every_s
            self._seen[key] = (now, 0) if due else (last, count)
            if len(self._seen) > 10_000:  # a flood of clients: start over rather than grow
                self._seen.clear()
        if due:
            more = f" ({count - 1} more since the last line)" if count > 1 else ""
            log.warning("refused %s from %s: HTTP %d, %s%s", path, client, status, reason, more)


_PATH: Final = re.compile(r"(?:\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*|(?<![\w.])/[^\s'\",;:)]+)")


def redact(message: str) -> str:
    """``message`` without filesystem paths and DSNs (for the unauthenticated readiness answer)."""
    return _PATH.sub("<redacted>", message)


class _NotUtf8Error(ValueError):
    """A request body that is not UTF-8 text; the message names the first byte that is not."""


def _utf8_text(raw: bytes) -> str:
    """A JSON body as text. JSON travels as UTF-8 (RFC 8259; a leading byte order mark is skipped):
    ``json.loads`` of bytes also guessed UTF-16 and UTF-32 and named their codecs in its errors.

    Raises:
        _NotUtf8Error: ``raw`` is not UTF-8.
    """
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        at = exc.start + len(raw) - len(exc.object)  # the decoder's offsets leave out a skipped mark
        raise _NotUtf8Error(f"byte 0x{raw[at]:02x} at offset {at} is not UTF-8") from None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


ErrorAnswer = Callable[[Request, int, str, dict[str, str] | None], Response]
"""How a route answers a refusal made before its handler runs: status, one-line message, extra headers."""


def _api_error(_: Request, status: int, message: str, headers: dict[str, str] | None) -> Response:
    """The API's error answer, ``{"error": message}``."""
    return _error(status, message, headers)


def _otlp_error(request: Request, status: int, message: str, headers: dict[str, str] | None) -> Response:
    """``/v1/traces``'s error answer: a ``google.rpc.Status`` encoded as the request was (OTLP/HTTP)."""
    result = otlp_error(status, message, headers, media=request.headers.get("content-type"))
    return Response(result.body, status_code=result.status, media_type=result.media_type, headers=result.headers)


class BodyTooLargeError(Exception):
    """The body is over the configured limit."""


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(state: ServiceState) -> PathLimit:
    """Build the Starlette app over a running :class:`ServiceState`."""
    cfg = state.config
    retry = {"Retry-After": str(cfg.retry_after_s)}

    def query_error(exc: queries.QueryError, refused_as: str = "") -> Response:
        """The answer to a failed query; with ``refused_as`` (the API's reason) a refusal (4xx) is counted
        under it and a query that failed (500) in ``query_errors`` (503, the store down, has its own series)."""
        if refused_as and 400 <= exc.status < 500:
            state.metrics.inc("rejected", label=refused_as)
        elif refused_as and exc.status == 500:
            state.metrics.inc("query_errors")
        return _error(exc.status, exc.message, retry if exc.status == 503 else None)

    refusals = RefusalLog()
    backfilled = threading.Event()  # the capture markers of request rows stored before markers existed

    def refused(request: Request, role: str, why: str = "", answer: ErrorAnswer = _api_error) -> Response | None:
        """The 401 or 403 to answer when the request's token does not hold ``role`` (logged and counted), else
        ``None``; ``why`` is appended to a 403 (what the role guards and how to get it); ``answer`` encodes it."""
        try:
            state.auth.check(request.headers.get("authorization"), role)
        except AuthError as exc:
            client = request.client.host if request.client is not None else "unknown client"
            refusals.refused(client, request.url.path, exc.status, exc.message)
            state.metrics.inc("unauthorized")
            state.metrics.inc("rejected", label="unauthorized" if exc.status == 401 else "forbidden")
            headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
            message = f"{exc.message}: {why}" if why and exc.status == 403 else exc.message
            return answer(request, exc.status, message, headers)
        return None

    def holds(request: Request, role: str) -> bool:
        """Whether the request's token holds ``role`` (nothing logged or counted: :func:`refused` does that)."""
        try:
            state.auth.check(request.headers.get("authorization"), role)
        except AuthError:
            return False
        return True

    def guarded(role: str, handler: Handler, answer: ErrorAnswer = _api_error) -> Handler:
        """``handler`` behind the token check; ``answer`` encodes the refusals made here (401, 403, 413)."""

        async def wrapped(request: Request) -> Response:
            if (refusal := refused(request, role, answer=answer)) is not None:
                return refusal
            try:
                return await handler(request)
            except BodyTooLargeError as exc:
                state.metrics.inc("rejected", label="too_large")
                return answer(request, 413, str(exc), None)

        return wrapped

    async def traces(request: Request) -> Response:
        raw = await _body(request, cfg.max_body_bytes)
        result = await run_in_threadpool(
            state.ingest.handle,
            raw,
            request.headers.get("content-type"),
            request.headers.get("content-encoding"),
        )
        return Response(result.body, status_code=result.status, media_type=result.media_type, headers=result.headers)

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        ok = state.writer.store is not None and state.writer.store_ok
        # unauthenticated: the reason without the host's paths or DSN (GET /api/v1/status has them)
        body = {"ready": ok, "store_ok": state.writer.store_ok, "last_error": redact(state.writer.last_error)}
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(state.metrics.render(), media_type="text/plain; version=0.0.4")

    async def status(_: Request) -> Response:
        return JSONResponse(await run_in_threadpool(_status, state))

    async def openapi(_: Request) -> Response:
        return JSONResponse(openapi_document())

    async def list_queries(_: Request) -> Response:
        try:
            return JSONResponse(queries.describe(state))
        except queries.QueryError as exc:
            return query_error(exc, BAD_QUERY)

    async def run_query(request: Request) -> Response:
        raw = await _body(request, 1 << 20)
        try:
            params: Any = json.loads(_utf8_text(raw) or "{}")
        except _NotUtf8Error as exc:
            return query_error(queries.QueryError(400, f"parameters must be a JSON object in UTF-8 text: {exc}"),
                               BAD_QUERY)  # fmt: skip
        except ValueError as exc:
            return query_error(queries.QueryError(400, f"parameters must be a JSON object: {exc}"), BAD_QUERY)
        try:
            data = await run_in_threadpool(queries.run_named, state, request.path_params["name"], params)
        except queries.QueryError as exc:
            return query_error(exc, BAD_QUERY)
        return Response(data, media_type=ARROW_STREAM)

    async def sql(request: Request) -> Response:
        raw = await _body(request, 1 << 20)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return query_error(queries.QueryError(400, "SQL must be UTF-8 text"), SQL_REFUSED)
        try:
            data = await run_in_threadpool(queries.run_sql, state, text)
        except queries.QueryError as exc:
            return query_error(exc, SQL_REFUSED)
        return Response(data, media_type=ARROW_STREAM)

    async def put_blob(request: Request) -> Response:
        digest = digest_of(request)
        if isinstance(digest, Response):
            return digest
        data = await _body(request, cfg.max_body_bytes)
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            state.metrics.inc("rejected", label="blob_digest")
            return _error(400, f"body hashes to sha256 {actual}, not the {digest} named in the path")
        # Folded: which blobs need the replay role is decided on the kind, and "Inputs" is the captured inputs too.
        kind = request.query_params.get("kind", "").strip().lower()
        media = request.query_params.get("media_type", "application/octet-stream")
        if (kind and not BLOB_KIND.fullmatch(kind)) or not MEDIA_TYPE.fullmatch(media):
            state.metrics.inc("rejected", label=BAD_BLOB)
            return _error(
                400,
                "kind must be a short name (letters, digits, _ . : -, at most 64) and media_type printable ASCII "
                "(at most 255 characters), such as ?kind=inputs&media_type=application/octet-stream",
            )
        try:
            await run_in_threadpool(_put_blob, state, data, kind, media)
        except StoreError as exc:
            return _error(503, queries.unavailable(exc), retry)
        return JSONResponse({"sha256": digest, "size_bytes": len(data)}, status_code=201)

    async def get_blob(request: Request) -> Response:
        digest = digest_of(request)
        if isinstance(digest, Response):
            return digest
        try:
            # Captured inputs are users' tensors (tenant data): only replay reads them, so only its role may. A
            # blob is captured inputs when it was stored as such, or when a request names it as its capture,
            # whatever kind its uploader gave it.
            if not holds(request, REPLAY) and await run_in_threadpool(_captured_inputs, state, digest, backfilled):
                refusal = refused(request, REPLAY, REPLAY_BLOB_WHY)
                if refusal is not None:
                    return refusal
            data = await run_in_threadpool(_get_blob, state, digest)
        except StoreUnavailableError as exc:
            return _error(503, queries.unavailable(exc), retry)
        except StoreError as exc:  # the stored bytes do not hash to the digest
            return _error(500, str(exc))
        if data is None:
            return _error(404, f"no blob with sha256 {digest}")
        return Response(data, media_type="application/octet-stream")

    async def faults(request: Request) -> Response:
        if not cfg.fault_control:
            return _error(404, "not found")
        try:
            body: Any = json.loads(_utf8_text(await _body(request, 4096)) or "{}")
        except ValueError as exc:  # _NotUtf8Error too
            return _error(400, f'send a JSON object such as {{"store_down": true}}: {exc}')
        if not isinstance(body, dict):
            return _error(400, 'send a JSON object such as {"store_down": true}')
        # Checked whole before anything is applied: a refused request changes nothing ("false" is no boolean).
        unknown = sorted(set(body) - {"store_down", "kill_inserts"})
        if unknown:
            return _error(400, f"unknown fault {unknown[0]!r}: the faults are store_down (true or false) and "
                          "kill_inserts (a count)")  # fmt: skip
        down = body.get("store_down", state.faults.store_down)
        if not isinstance(down, bool):
            return _error(400, f"store_down takes true or false, not {down!r}")
        kills = body.get("kill_inserts", 0)
        if isinstance(kills, bool) or not isinstance(kills, int) or kills < 0:
            return _error(400, "kill_inserts takes a count of inserts to cancel")
        state.faults.store_down = down
        if kills:
            state.faults.cancel_inserts(state.open_store, kills, lambda: state.metrics.get("store_errors"))
        return JSONResponse({"store_down": state.faults.store_down, "kill_inserts": kills})

    def digest_of(request: Request) -> str | Response:
        """The path's sha256, or the 400 to answer (the route takes any text; the store keys on a digest)."""
        digest = str(request.path_params["sha256"]).lower()
        if not _SHA256.fullmatch(digest):
            state.metrics.inc("rejected", label="bad_digest")
            return _error(400, f"{digest[:80]!r} is not a sha256 digest (64 hex digits)")
        return digest

    routes = [
        Route("/v1/traces", guarded("ingest", traces, _otlp_error), methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/metrics", guarded(METRICS, metrics), methods=["GET"]),
        Route("/api/v1/status", guarded("read", status), methods=["GET"]),
        Route("/api/v1/queries", guarded("read", list_queries), methods=["GET"]),
        Route("/api/v1/query/{name}", guarded("read", run_query), methods=["POST"]),
        Route("/api/v1/sql", guarded("admin", sql), methods=["POST"]),
        Route("/api/v1/blobs/{sha256:str}", guarded("ingest", put_blob), methods=["PUT"]),
        Route("/api/v1/blobs/{sha256:str}", guarded("read", get_blob), methods=["GET"]),
        Route("/api/v1/_faults", guarded("admin", faults), methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    return PathLimit(app, state)


MAX_PATH_BYTES: Final = 8192
"""Longest request path answered by a route; longer ones get 414 (the server reads heads up to
:data:`~inferensics.collector.service.server.MAX_HEAD_BYTES`, so the answer reaches the sender)."""
_SHA256: Final = re.compile(r"[0-9a-f]{64}")


class PathLimit:
    """ASGI wrapper: 414 for a request path longer than :data:`MAX_PATH_BYTES`, counted."""

    def __init__(self, app: Starlette, state: ServiceState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and len(scope.get("raw_path") or scope["path"]) > MAX_PATH_BYTES:
            self.state.metrics.inc("rejected", label="uri_too_long")
            size = len(scope.get("raw_path") or scope["path"])
            response = _error(414, f"request path of {size} bytes is longer than {MAX_PATH_BYTES} bytes")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such path, a method the path does not take) as JSON errors like the rest."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no such path {request.url.path}; the API is listed at /openapi.json"
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"{request.method} is not allowed on {request.url.path}" + (f"; use {allowed}" if allowed else "")
    else:
        message = str(exc.detail)
    return _error(exc.status_code, message, dict(exc.headers or {}))


def _put_blob(state: ServiceState, data: bytes, kind: str, media_type: str) -> None:
    with state.query_lock:
        state.query_store().put_blob(data, kind, media_type=media_type)


def _captured_inputs(state: ServiceState, digest: str, backfilled: threading.Event) -> bool:
    """Whether the blob is a request's captured inputs (:func:`~inferensics.collector.service.capture_index.
    captured_inputs`); the first check of a process first writes the markers of request rows stored without
    them (``backfilled`` is set once that succeeded)."""
    with state.query_lock:
        store = state.query_store()
        if not backfilled.is_set():
            try:
                store.client.command(backfill_sql(store.database))
            except Exception as exc:  # refused rather than answered without them: the check would be incomplete
                raise StoreUnavailableError(
                    f"cannot index the captured inputs of the stored requests: {error_line(exc)}"
                ) from None
            backfilled.set()
        return captured_inputs(store, digest)


def _get_blob(state: ServiceState, digest: str) -> bytes | None:
    with state.query_lock:
        return state.query_store().get_blob(digest)


def _status(state: ServiceState) -> dict[str, Any]:
    out: dict[str, Any] = {
        "service": "inferensics-collector",
        "uptime_s": round(time.monotonic() - state.started, 3),
        "store": {"ok": state.writer.store_ok, "last_error": state.writer.last_error},
        "spool": {
            "dir": str(state.spool.directory),
            "bytes": state.spool.bytes,
            "files": state.spool.files(),
            "max_bytes": state.config.spool_max_bytes,
        },
        "counters": {
            name: state.metrics.total(name)
            for name in (
                "received_spans",
                "spooled_spans",
                "decoded_rows",
                "written_rows",
                "deduplicated_rows",
                "rejected",
            )
        },
        "rejected_by_reason": state.metrics.by_label("rejected"),
    }
    try:
        with state.query_lock:
            store = state.query_store()
            version = store.schema_version()
            out["store"].update(
                dsn=str(store.dsn),
                schema_version=version,
                latest_version=LATEST_VERSION,
                row_counts=store.row_counts() if version else {},
                disk_bytes=store.disk_bytes() if version else {},
            )
    except StoreError as exc:
        out["store"]["error"] = str(exc)
    return out
