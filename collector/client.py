"""The Python client of the collector service, used by the dashboard, the reports and the CLI.

>>> client = ServiceClient("http://127.0.0.1:4318", token="s3cret")   # doctest: +SKIP
>>> client.query("fleet_overview", model="llama").head()               # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pyarrow as pa

from inferensics.collector.service_url import CA_FILE_ENV, DEFAULT_URL, SERVICE_URL_ENV, TOKEN_ENV

if TYPE_CHECKING:
    import polars as pl

__all__ = ["CA_FILE_ENV", "DEFAULT_URL", "SERVICE_URL_ENV", "TOKEN_ENV", "ServiceClient", "ServiceError"]


class ServiceError(RuntimeError):
    """A failed call to the service, with one line that says what went wrong.

    Attributes:
        status: The HTTP status, or ``None`` when the service could not be reached.
        message: The server's message (or the connection failure).
        detail: The server's own words without the method, path and status (``message`` when none); of a named
            query's refusal (400), without the query's name either (:meth:`ServiceClient.query`).
    """

    def __init__(self, message: str, status: int | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.detail = detail if detail is not None else message

    @property
    def line(self) -> str:
        """The line a command or a dashboard page shows: a refused request (400: a bad parameter or filter value)
        in the service's own words, as the same query on a store says them (no method, path, status or query
        name: the user fixes the value, not the plumbing); other failures (5xx, unreachable, a refused token) as
        the client says them, where the URL, path and status help."""
        return self.detail if self.status == 400 else self.message


class ServiceClient:
    """Talks to one collector service over HTTP(S).

    Args:
        url: Base URL; defaults to ``$INFERENSICS_SERVICE_URL``, then ``http://127.0.0.1:4318``.
        token: Bearer token; defaults to ``$INFERENSICS_TOKEN``.
        timeout: Seconds per request.
        verify: TLS verification: ``True`` checks an ``https://`` service's certificate against
            ``$INFERENSICS_CA_FILE`` when it is set (a PEM file of CA certificates; for a self-signed certificate,
            that certificate), else the system's CAs (``$SSL_CERT_FILE`` replaces those); a path does the same
            with that file; ``False`` checks nothing.
        url_source: Where the user gave the URL, named in the unreachable message (a command whose flag is not
            ``--service`` passes its own, e.g. ``--shapes-from-service``).
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        verify: bool | str = True,
        url_source: str = f"--service or ${SERVICE_URL_ENV}",
    ) -> None:
        given = url or os.environ.get(SERVICE_URL_ENV) or DEFAULT_URL
        self.url = given.rstrip("/")
        self.url_source = url_source
        wrong = _not_a_url(self.url)
        if wrong:  # httpx raised InvalidURL (no ServiceError: a traceback) or said "cannot reach ... is it running?"
            raise ServiceError(
                f"{given!r} is not a service URL ({wrong}): pass http(s)://HOST:PORT with {url_source}, "
                f"e.g. {DEFAULT_URL}"
            )
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if verify is True and os.environ.get(CA_FILE_ENV):
            verify = os.environ[CA_FILE_ENV]
        self.ca_file = verify if isinstance(verify, str) else ""
        try:
            tls: bool | ssl.SSLContext = (
                ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
            )
        except (OSError, ssl.SSLError) as exc:
            where = f"${CA_FILE_ENV}" if verify == os.environ.get(CA_FILE_ENV) else "the CA file"
            raise ServiceError(
                f"cannot read the CA certificates {verify} ({where}): {getattr(exc, 'strerror', None) or exc}; "
                "give a readable PEM file"
            ) from None
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, verify=tls)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unreachable(self, exc: Exception) -> str:
        untrusted = _certificate_failure(exc)
        if untrusted is not None:
            checked = f"the CA certificates in {self.ca_file}" if self.ca_file else "this machine's CA certificates"
            return (
                f"cannot reach the inferensics service at {self.url}: its TLS certificate is not trusted "
                f"({untrusted.verify_message or untrusted.reason}; checked against {checked}): set "
                f"${CA_FILE_ENV} to a PEM file of the CA that signed it (a self-signed certificate: the certificate "
                "file itself), or use a URL whose host name the certificate holds"
            )
        return (
            f"cannot reach the inferensics service at {self.url}: {exc}; is it running (`inferensics serve`)? "
            f"Pass its URL with {self.url_source}"
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ServiceError(self._unreachable(exc)) from None
        except RuntimeError:  # httpx's "the client has been closed" (a cache let go of this client meanwhile)
            if not self._http.is_closed:
                raise
            raise ServiceError(f"the connection to {self.url} was closed while in use; ask again") from None
        if path.startswith("/api/") and _not_the_service(response):
            raise ServiceError(
                f"{self.url} is not an inferensics collector service (it answered {path} with "
                f"{response.status_code} {response.headers.get('content-type') or 'no content type'}; a dashboard's "
                f"URL?): pass the URL `inferensics serve` listens on, e.g. {DEFAULT_URL}",
                response.status_code,
            )
        if response.status_code == 401:
            raise ServiceError(
                f"the service at {self.url} refused the token ({_message(response)}); "
                f"pass the right token or set ${TOKEN_ENV}",
                401,
            )
        if response.status_code >= 400:
            said = _message(response)
            raise ServiceError(f"{method} {path}: {response.status_code} {said}", response.status_code, said)
        return response

    def health(self) -> dict[str, Any]:
        """Liveness and readiness: ``{"alive": True, "ready": bool, ...}``; raises when unreachable."""
        self._call("GET", "/healthz")
        return {"alive": True, **self.ready()}

    def ready(self) -> dict[str, Any]:
        """Readiness alone (``/readyz``, no token): ``{"ready": bool, ...}``, answered 503 while the store is down;
        raises when unreachable, ``ValueError`` when the answer is not JSON."""
        try:
            ready = self._http.get("/readyz")
        except httpx.HTTPError as exc:
            raise ServiceError(self._unreachable(exc)) from None
        body: dict[str, Any] = ready.json()
        return body

    def status(self) -> dict[str, Any]:
        """Store DSN, schema version, row counts, spool bytes and files, uptime and counters."""
        result: dict[str, Any] = self._call("GET", "/api/v1/status").json()
        return result

    def queries(self) -> dict[str, Any]:
        """Named queries with their descriptions and parameter schemas."""
        result: dict[str, Any] = self._call("GET", "/api/v1/queries").json()["queries"]
        return result

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        """Run a named query with typed parameters and return its rows.

        Raises:
            ServiceError: a refused query (400: a bad parameter or filter value) with ``detail`` the service's words
                without the query's name in front (as a store read in-process says them: a command shows them alone,
                they are the user's to fix); ``message`` keeps the method, path and status.
        """
        body = json.dumps(params, default=str)
        try:
            response = self._call(
                "POST",
                f"/api/v1/query/{quote(name, safe='')}",
                content=body,
                headers={"Content-Type": "application/json"},
            )
        except ServiceError as exc:
            if exc.status != 400:
                raise
            raise ServiceError(exc.message, 400, exc.detail.removeprefix(f"{name}: ")) from None
        return _frame(response.content)

    def sql(self, text: str) -> pl.DataFrame:
        """Run read-only SQL (admin token) and return its rows."""
        response = self._call("POST", "/api/v1/sql", content=text.encode(), headers={"Content-Type": "text/plain"})
        return _frame(response.content)

    def put_blob(self, data: bytes, kind: str, media_type: str = "application/octet-stream") -> str:
        """Store ``data`` under its sha256 and return the hex digest."""
        digest = hashlib.sha256(data).hexdigest()
        self._call(
            "PUT",
            f"/api/v1/blobs/{digest}",
            params={"kind": kind, "media_type": media_type},
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        return digest

    def get_blob(self, sha256: str) -> bytes:
        """The blob's bytes, verified against the digest here as well as on the server."""
        data = self._call("GET", f"/api/v1/blobs/{quote(sha256, safe='')}").content
        if hashlib.sha256(data).hexdigest() != sha256.lower():
            raise ServiceError(f"blob {sha256} arrived corrupt: its bytes hash to {hashlib.sha256(data).hexdigest()}")
        return data

    def metrics(self) -> dict[str, float]:
        """The service's Prometheus samples: ``{"name{labels}": value}``."""
        out: dict[str, float] = {}
        for line in self._call("GET", "/metrics").text.splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
        return out


def _not_a_url(url: str) -> str:
    """What makes ``url`` no URL of a service, or ``""``."""
    try:
        parsed = httpx.URL(url)
        port = parsed.port
    except (httpx.InvalidURL, ValueError) as exc:
        return str(exc).rstrip(".")
    if parsed.scheme not in ("http", "https"):
        return (
            f"the scheme is {parsed.scheme}://, not http:// or https://" if parsed.scheme else "no http:// or https://"
        )
    if not parsed.host:
        return "no host"
    if port is not None and not 0 < port < 65536:
        return f"port {port} is not 1-65535"
    return ""


def _certificate_failure(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate check that failed under an httpx error (a self-signed or unknown CA, a name mismatch)."""
    seen: BaseException | None = exc
    for _ in range(8):  # httpx wraps httpcore's error, which wraps the ssl module's
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _not_the_service(response: httpx.Response) -> bool:
    """Whether an answer under ``/api/`` comes from some other web server (the service answers Arrow or JSON,
    and knows the methods of its routes)."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return response.status_code == 405 or kind.startswith("text/html")


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])
    return response.text[:300]


def _frame(data: bytes) -> pl.DataFrame:
    import polars as pl

    table = pa.ipc.open_stream(data).read_all()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame
