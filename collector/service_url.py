"""Where a collector service is: its environment variables, default URL, and the check every service URL
gets where it enters (``instrument``, ``inferensics dashboard``).

Standard library only: the host SDK, the service's client and the CLI all import it without loading one
another's dependencies, and each of these names is defined here only."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

SERVICE_URL_ENV: Final = "INFERENSICS_SERVICE_URL"
"""Environment variable naming the collector service when no URL is given."""
TOKEN_ENV: Final = "INFERENSICS_TOKEN"
"""Environment variable holding the bearer token when none is given."""
CA_FILE_ENV: Final = "INFERENSICS_CA_FILE"
"""Environment variable naming a PEM file of the CA certificates that an ``https://`` service's certificate is
checked against (a self-signed certificate: that certificate), instead of the system's."""
DEFAULT_URL: Final = "http://127.0.0.1:4318"
"""Where the service's client and the dashboard look when neither a URL nor ``$INFERENSICS_SERVICE_URL`` is given."""


def service_url_problem(url: str) -> str:
    """Why ``url`` cannot be a collector service's base URL (no http(s) scheme, no host, a bad port), or ``""``.

    Every request to such a URL would fail, one by one, later."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number or out of range
    except ValueError as exc:
        return f"{exc}; expected http(s)://host:port"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected http(s)://host:port of the collector service"
    if parts.path.rstrip("/").endswith("/v1/traces"):
        return "that is the service's OTLP endpoint; give its base URL, without /v1/traces"
    return ""
