"""Run the service: listen, build the state, serve the app with uvicorn, drain and seal on shutdown."""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import uvicorn

from inferensics.collector.service.app import create_app
from inferensics.collector.service.config import LEGACY_SPOOL, ServiceConfig
from inferensics.collector.service.state import build_state
from inferensics.schema.dsn import DATA_DIR_ENV, DsnError, resolve_dsn

log = logging.getLogger("inferensics.collector.service")

MAX_HEAD_BYTES = 4 << 20
"""Largest request head (line and headers) read before answering: a longer path still gets its 414 instead of a
connection reset (h11's default of 16 KiB closed the socket on unread bytes)."""
BACKLOG = 2048
"""Pending connections the listening socket queues (uvicorn's default)."""

_BIND_ADVICE = {
    errno.EADDRINUSE: "the port is in use (another collector, or another service): stop it or choose another --port",
    errno.EACCES: "permission denied (ports below 1024 need privileges): choose a port above 1023",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's: give one of its addresses with --host",
}


class ListenError(Exception):
    """The service's address cannot be listened on; the message says why and what to do."""


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, bound before the store and the spool are opened.

    Raises:
        ListenError: the host does not resolve, or the address cannot be bound (in use, privileged, not
            this machine's), naming the address and what to change.
    """
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ListenError(
            f"cannot listen on {where}: the host does not resolve ({exc}); give an address or a name of this "
            "machine with --host"
        ) from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        advice = _BIND_ADVICE.get(exc.errno or 0, exc.strerror or str(exc))
        raise ListenError(f"cannot listen on {where}: {advice}") from exc
    sock.set_inheritable(True)
    return sock


def masked_dsn(dsn: str) -> str:
    """``dsn`` for a log line: the password replaced by ``***`` (also in a DSN that does not parse)."""
    try:
        if not dsn:  # the store the service opens: in $INFERENSICS_DATA_DIR, else the embedded default directory
            return f"{resolve_dsn(None)} ({'in $' + DATA_DIR_ENV if os.environ.get(DATA_DIR_ENV) else 'default'})"
        return str(resolve_dsn(dsn))
    except DsnError:
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)


def serve(
    config: ServiceConfig, sock: socket.socket | None = None, *, named_queries: Mapping[str, Any] | None = None
) -> None:
    """Serve until SIGINT/SIGTERM; on the way out, try to drain the spool, then seal what is left.

    ``sock`` is a socket :func:`listen` made (the CLI binds before it starts anything else); without one
    the address is bound here, before the store is opened. ``named_queries`` are the queries the service
    answers by name (``inferensics serve`` hands it the analytics registry's).

    Raises:
        ListenError: the address cannot be listened on (nothing was opened).
        StartError: the spool directory cannot be used or is another service's, or another process holds the
            embedded store (the socket is closed, nothing else was kept open).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if sock is None:
        sock = listen(config.host, config.port)
    try:
        state = build_state(config, named_queries=named_queries)
    except BaseException:
        sock.close()
        raise
    app = create_app(state)
    tls = {}
    if config.tls_cert:
        tls = {"ssl_certfile": config.tls_cert, "ssl_keyfile": config.tls_key}
    log.info(
        "inferensics collector on %s://%s:%d, store %s, spool %s",
        "https" if tls else "http",
        config.host,
        config.port,
        masked_dsn(config.dsn),
        state.spool.directory,
    )
    if Path(state.spool.directory).name == LEGACY_SPOOL:
        log.warning(
            "inferensics collector: the spool %s is where an earlier release kept it, and it holds spans not yet "
            "written: it is used until it is empty; then the data directory's spool/ beside store/ is",
            state.spool.directory,
        )
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=10,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            **tls,  # type: ignore[arg-type]
        )
    )
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        log.info("inferensics collector stopping: writing what the spool holds (10 s at most), then closing the store")
        if state.writer.store_ok:
            state.writer.drain(timeout=10)
        state.close()
        log.info("inferensics collector stopped")
    if not server.started:
        raise SystemExit(3)  # what uvicorn.run exits with when the app did not start
