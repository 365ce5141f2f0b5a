"""The demo says a refusal (400) of a running service in the service's words, as the command line does
(``ServiceError.line``): it read ``POST /api/v1/sql: 400 ...`` before them."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from inferensics.demo.runner import DemoError, _check_token
from tests.loopback import serving

REFUSED = "query failed: Code: 60. DB::Exception: Unknown table expression identifier"


class _Refusing(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"error": REFUSED}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_refusal_of_the_running_service_reads_in_its_words() -> None:
    with serving(_Refusing) as url, pytest.raises(DemoError) as caught:
        _check_token(url, "t")
    assert str(caught.value).startswith(f"{REFUSED}; the demo sends, pushes and reads its run back"), caught.value
