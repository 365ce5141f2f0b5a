"""Bearer-token authentication with roles (ingest, read, replay, admin)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Final

ADMIN: Final = "admin"
REPLAY: Final = "replay"
"""The role that reads what replay re-executes: requests' captured inputs (tenant data)."""


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
        self._tokens = dict(tokens)
        self.enabled = enabled

    def check(self, authorization: str | None, role: str) -> None:
        """Raise :class:`AuthError` unless the header carries a token holding ``role`` (or admin)."""
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
        if role not in roles and ADMIN not in roles:
            raise AuthError(403, f"token lacks the {role!r} role")

    def _lookup(self, token: str) -> frozenset[str] | None:
        # Compare every configured token in constant time so timing does not reveal a prefix.
        found: frozenset[str] | None = None
        for known, roles in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = roles
        return found
