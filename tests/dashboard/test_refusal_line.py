"""A refused query (400) reads on the dashboard as the command line says it (``query_runner.service_line``): the
service's words, nothing cut. The page cut a leading ``word: `` as if it were the query's name, which the client
already takes off, so a refusal that opened with the parameter's name lost it."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from inferensics.cli.query_runner import service_line
from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.dashboard._internal.service import said
from tests.loopback import serving

REFUSED = "lookback_s: must be longer than quiet_after_s (60)"


class _Refusing(BaseHTTPRequestHandler):
    """A named query refused (400) in the service's body shape: the query's name, then the analytics' words."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        name = self.path.rsplit("/", 1)[-1]
        body = json.dumps({"error": f"{name}: {REFUSED}"}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_refusal_reads_on_the_dashboard_as_on_the_command_line() -> None:
    with serving(_Refusing) as url, ServiceClient(url, token="t") as client, pytest.raises(ServiceError) as caught:
        client.query("host_health", lookback_s=30)
    assert said(caught.value) == service_line(caught.value) == REFUSED
