"""Bearer-token authentication with roles (ingest, read, metrics, replay, admin)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Final

INGEST: Final = "ingest"
"""The role that sends: OTLP exports and blob uploads."""
READ: Final = "read"
"""The role that reads: status, named queries, blobs other than captured inputs (the dashboard's); it holds
:data:`METRICS` too."""
METRICS: Final = "metrics"
"""The role that scrapes ``/metrics`` and nothing else: a Prometheus token, useless to whoever reads it from the
scraper's configuration."""
REPLAY: Final = "replay"
"""The role that reads what replay re-executes: requests' captured inputs (tenant data)."""
ADMIN: Final = "admin"
"""Every role, and admin SQL and the fault control besides."""
ROLES: Final = (INGEST, READ, METRICS, REPLAY, ADMIN)
"""Roles a token can hold, in the order the configuration's messages list them."""
IMPLIED: Final[Mapping[str, frozenset[str]]] = {READ: frozenset({METRICS}), ADMIN: frozenset(ROLES)}
"""Roles a role holds besides itself: ``read`` scraped ``/metrics`` before ``metrics`` existed, and still does."""


def granted(roles: frozenset[str]) -> frozenset[str]:
    """``roles`` with every role they imply (:data:`IMPLIED`)."""
    return roles.union(*(IMPLIED.get(role, frozenset()) for role in roles))


class AuthError(Exception):
    """Authentication failed: ``status`` is 401 (no or unknown token) or 403 (token lacks the role)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class TokenAuth:
    """Checks ``Authorization: Bearer <token>`` against configured tokens and their roles.

    With ``enabled=False`` every request passes (development on loopback only).
    """

    def __init__(self, tokens: Mapping[str, frozenset[str]], *, enabled: bool = True) -> None:
        self._tokens = {token: granted(roles) for token, roles in tokens.items()}
        self.enabled = enabled

    def check(self, authorization: str | None, role: str) -> None:
        """Raise :class:`AuthError` unless the header carries a token holding ``role`` (itself, or through a role
        that implies it: admin implies every role, read implies metrics)."""
        if not self.enabled:
            return
        if not authorization:
            raise AuthError(401, "missing bearer token: send 'Authorization: Bearer <token>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError(401, "malformed Authorization header: expected 'Bearer <token>'")
        roles = self._lookup(token.strip())
        if roles is None:
            raise AuthError(401, "unknown bearer token")
        if role not in roles:
            raise AuthError(403, f"token lacks the {role!r} role")

    def _lookup(self, token: str) -> frozenset[str] | None:
        # Compare every configured token in constant time so timing does not reveal a prefix.
        found: frozenset[str] | None = None
        for known, roles in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = roles
        return found
