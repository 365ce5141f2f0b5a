"""A stub HTTP service on loopback for tests: a ``BaseHTTPRequestHandler`` served on its own thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port; yields ``http://127.0.0.1:PORT``; stopped on exit."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def refusing(said: str, *, status: int = 400, name_first: bool = False) -> type[BaseHTTPRequestHandler]:
    """A handler answering every POST ``status`` with the service's JSON error body ``{"error": said}``
    (``name_first``: prefixed with the last segment of the path, as the service names a refused named query)."""
    import json

    class Refusing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            error = f"{self.path.rsplit('/', 1)[-1]}: {said}" if name_first else said
            body = json.dumps({"error": error}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Refusing
