"""The dashboard's service clients: one per service and token, shared across reruns, closed when dropped."""

from __future__ import annotations

from inferensics.collector.client import ServiceClient
from inferensics.dashboard._internal.service import _client
from tests.dashboard.conftest import SeededService

CACHED_CLIENTS = 8
"""``_client``'s ``max_entries``."""


def closed(client: ServiceClient) -> bool:
    """Whether the client's connection pool is closed (its sockets with it)."""
    return client._http.is_closed


def test_a_client_dropped_from_the_cache_is_closed(seeded: SeededService) -> None:
    """A ninth service or token dropped the least recently used client with its keep-alive socket still open,
    and whichever test the garbage collector later reached it in failed on the ResourceWarning."""
    first = _client(seeded.url, seeded.token)
    assert first.queries(), "the first client holds an open connection to the service"
    assert not closed(first)

    others = [_client(seeded.url, f"token-{i}") for i in range(CACHED_CLIENTS)]

    assert closed(first), "the client dropped from the cache was left open"
    assert not any(closed(c) for c in others)
    assert all(_client(seeded.url, f"token-{i}") is c for i, c in enumerate(others)), "the cache still serves"
    _client.clear()
    assert all(closed(c) for c in others), "clearing the cache left clients open"
