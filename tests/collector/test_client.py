"""The service client's own errors: each is a ServiceError with one line, never httpx's exception."""

from __future__ import annotations

import pytest

from inferensics.collector.client import ServiceClient, ServiceError


def test_a_client_closed_while_in_use_says_so() -> None:
    """The dashboard's client cache closes a client it lets go of; a page still holding it got httpx's
    ``RuntimeError`` (a traceback on the page) instead of the error panel's ServiceError."""
    client = ServiceClient("http://127.0.0.1:9", token="t")
    client.close()
    with pytest.raises(ServiceError, match=r"^the connection to http://127.0.0.1:9 was closed while in use"):
        client.status()
