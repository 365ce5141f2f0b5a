"""Run the service: listen, build the state, serve the app with uvicorn, drain and seal on shutdown.

SIGHUP reads the config file's ``[tokens]`` again (``$INFERENSICS_TOKENS`` and the arguments stay as the process
started, see :func:`~inferensics.collector.service.config.reload_tokens`) and swaps them in; it never stops the
service. Its log line names where the tokens in use were read from.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import uvicorn

from inferensics.collector.errors import ConfigError
from inferensics.collector.service.app import create_app
from inferensics.collector.service.auth import TokenAuth
from inferensics.collector.service.config import LEGACY_SPOOL, ServiceConfig, reload_tokens, token_sources
from inferensics.collector.service.spool import retire
from inferensics.collector.service.state import ServiceState, build_state
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


def reload_auth(state: ServiceState) -> bool:
    """Read the tokens again and give the service the new set; on a bad file or an empty set keep the old one.

    Returns whether the new tokens are in use. Each outcome is one log line naming where the tokens were read from
    (the config file, ``$INFERENSICS_TOKENS``, the arguments), never a token.
    """
    config = state.config
    if not config.config_file:
        sources = token_sources(config, config.tokens)
        if not sources:
            log.warning(
                "SIGHUP: tokens not reloaded: the service started without a config file and without tokens%s; to "
                "rotate tokens without a restart, keep them in a config file's [tokens] (--config, "
                "$INFERENSICS_CONFIG), which SIGHUP reads again",
                "" if config.auth else " (authentication is off)",
            )
            return False
        log.warning(
            "SIGHUP: tokens not reloaded: they come from %s, which a running process cannot see change; restart the "
            "collector to rotate them (systemctl restart inferensics-collector), or keep them in a config file's "
            "[tokens] (--config, $INFERENSICS_CONFIG), which SIGHUP reads again",
            _and([place for place, _ in sources]),
        )
        return False
    try:
        tokens = reload_tokens(config)
    except ConfigError as exc:
        log.error("SIGHUP: tokens not reloaded, the previous ones stay in use: %s", exc)
        return False
    sources = token_sources(config, tokens)
    if config.auth and not tokens:
        log.error(
            "SIGHUP: tokens not reloaded: %s %s none; the previous ones stay in use",
            _and([place for place, _ in sources]),
            "give" if len(sources) > 1 else "gives",
        )
        return False
    # The handlers read state.auth on every request: one assignment swaps the whole set at once.
    state.auth = TokenAuth(tokens, enabled=config.auth)
    read = [f"{n} from {place}{'' if place.startswith('config file') else ' as the process started'}"
            for place, n in sources]  # fmt: skip
    many = "" if len(tokens) == 1 else "s"
    log.info("SIGHUP: %d token%s in use, the config file read again: %s", len(tokens), many, _and(read))
    return True


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + " and " + items[-1]


def _on_sighup(state: ServiceState) -> Any:
    """Reload the tokens on SIGHUP (whose default action ends the process); returns the handler it replaced
    (``None`` off the main thread, which cannot take signals)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    # the reload reads a file: off the signal handler, so the event loop is not held up by it
    return signal.signal(
        signal.SIGHUP, lambda *_: threading.Thread(target=reload_auth, args=(state,), daemon=True).start()
    )


def retire_legacy_spool(config: ServiceConfig) -> None:
    """Remove the spool folder an earlier release kept beside the store once it holds no spans (one log line)."""
    legacy = config.legacy_spool_dir()
    if legacy is None:
        return
    try:
        done = retire(legacy)
    except OSError as exc:
        log.warning("the spool folder %s of an earlier release holds no spans; cannot retire it: %s", legacy, exc)
        return
    if done:
        log.info("the spool folder of an earlier release holds no spans any more: %s", done)


def serve(
    config: ServiceConfig, sock: socket.socket | None = None, *, named_queries: Mapping[str, Any] | None = None
) -> None:
    """Serve until SIGINT/SIGTERM; on the way out, try to drain the spool, then seal what is left. SIGHUP reloads
    the tokens (:func:`reload_auth`).

    ``sock`` is a socket :func:`listen` made (the CLI binds before it starts anything else); without one
    the address is bound here, before the store is opened. ``named_queries`` are the queries the service
    answers by name (``inferensics serve`` hands it the analytics registry's).

    Raises:
        ListenError: the address cannot be listened on (nothing was opened).
        StartError: the store's schema is newer than this release's, the spool directory cannot be used or is
            another service's, or another process holds the embedded store (the socket is closed, nothing else
            was kept open).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A server store that is down: the HTTP client's pool logged a "Retrying (...) after connection broken by
    # NewConnectionError(...)" line on every attempt, beside the service's own one line saying what to do.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    if sock is None:
        sock = listen(config.host, config.port)
    try:
        retire_legacy_spool(config)
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
            "written: this collector writes them and spools there until it holds none; the next stop or start "
            "then removes it, and the spool is %s (back up %s until then)",
            state.spool.directory,
            Path(state.spool.directory).with_name("spool"),
            state.spool.directory,
        )
    previous_hup = _on_sighup(state)
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
        if previous_hup is not None:
            signal.signal(signal.SIGHUP, previous_hup)
        sock.close()
        log.info("inferensics collector stopping: writing what the spool holds (10 s at most), then closing the store")
        if state.writer.store_ok:
            state.writer.drain(timeout=10)
        state.close()
        if Path(state.spool.directory).name == LEGACY_SPOOL:
            retire_legacy_spool(config)
        log.info("inferensics collector stopped")
    if not server.started:
        raise SystemExit(3)  # what uvicorn.run exits with when the app did not start
