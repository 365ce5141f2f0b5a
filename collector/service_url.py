"""The check every collector-service URL gets where it enters (``instrument``, ``inferensics dashboard``).

Standard library only: the host SDK and the CLI both import it without loading the other's dependencies."""

from __future__ import annotations

from urllib.parse import urlsplit


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
    return ""
