"""Run the service: build the state, serve the app with uvicorn, drain and seal on shutdown."""

from __future__ import annotations

import logging

import uvicorn

from inferensics.collector.service.app import create_app
from inferensics.collector.service.config import ServiceConfig
from inferensics.collector.service.state import build_state

log = logging.getLogger("inferensics.collector.service")


def serve(config: ServiceConfig) -> None:
    """Serve until SIGINT/SIGTERM; on the way out, try to drain the spool, then seal what is left."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    state = build_state(config)
    app = create_app(state)
    tls = {}
    if config.tls_cert:
        tls = {"ssl_certfile": config.tls_cert, "ssl_keyfile": config.tls_key}
    log.info(
        "inferensics collector on %s://%s:%d, store %s, spool %s",
        "https" if tls else "http",
        config.host,
        config.port,
        config.dsn or "(default)",
        state.spool.directory,
    )
    try:
        uvicorn.run(
            app,
            host=config.host,
            port=config.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=10,
            **tls,  # type: ignore[arg-type]
        )
    finally:
        if state.writer.store_ok:
            state.writer.drain(timeout=10)
        state.close()
