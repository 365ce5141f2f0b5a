"""The demo's child processes: the embedded service starts, answers, and stops cleanly."""

from __future__ import annotations

import socket
from pathlib import Path

from inferensics.collector.client import ServiceClient
from inferensics.demo import processes


def test_free_port_skips_a_taken_port() -> None:
    """A port in use is passed over for the next one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert processes.free_port(port) != port


def test_embedded_service_starts_ready_and_stops(tmp_path: Path) -> None:
    """``inferensics serve`` on loopback with a store in the data directory; SIGINT ends it."""
    child, url = processes.start_service(tmp_path, processes.free_port(4480))
    try:
        with ServiceClient(url) as client:
            assert client.health()["ready"]
            assert "requests" in client.status()["store"]["row_counts"]
    finally:
        child.stop()
    assert not child.alive()
    assert (tmp_path / "store").is_dir()
    assert (tmp_path / "service.log").is_file()
