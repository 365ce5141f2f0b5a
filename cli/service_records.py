"""Rows a command writes through the collector service (a replay's result, a canary verdict): one OTLP
export to the service's ingest endpoint, the same path a host's records take, and its outcome in one line."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence

from inferensics.collector.host.export_health import CAUSES
from inferensics.collector.host.export_health import log as exporter_log
from inferensics.collector.host.otlp_exporter import OtlpExporter
from inferensics.collector.service_url import TOKEN_ENV
from inferensics.schema import Event

_ADVICE = {
    "auth": f"pass a token with the ingest (or admin) role: --token or ${TOKEN_ENV}",
    "down": "check that the service is up (inferensics status --service URL)",
    "back_pressure": "the service is shedding load: run the command again later",
    "rejected": "check that this inferensics is the service's version",
}


@contextlib.contextmanager
def _quiet_exporter_log() -> Iterator[None]:
    # The exporter logs each refusal once, worded for a serving host ("records are being dropped"); here the
    # command's own line says it.
    before = exporter_log.disabled
    exporter_log.disabled = True
    try:
        yield
    finally:
        exporter_log.disabled = before


CHUNK_ROWS = 4096
"""Rows queued for export at a time (the exporter's queue holds 8192; more would be dropped)."""


def record_through_service(
    url: str, token: str | None, rows: Sequence[Event], table: str, *, timeout_s: float = 3.0
) -> tuple[bool, str]:
    """Send ``rows`` to the service at ``url`` and wait for its answer (at most ``timeout_s`` for each
    :data:`CHUNK_ROWS` of them); the service answers once it holds them durably.

    Returns:
        Whether every row was accepted, and one line saying so or why not and what to do.
    """
    with _quiet_exporter_log():
        exporter = OtlpExporter(url, host=socket.gethostname(), token=token)
        try:
            for start in range(0, len(rows), CHUNK_ROWS):
                exporter.export_records(rows[start : start + CHUNK_ROWS])
                delivered = exporter.wait_exported(timeout_s)
                if not delivered or any(v for k, v in exporter.stats().items() if k.startswith("export_refused_")):
                    break
            stats = exporter.stats()
            detail = exporter.health.last_error
        finally:
            exporter.shutdown()
    if stats["export_spans_sent"] >= len(rows):
        return True, f"recorded in {table}"
    cause = next((c for c in CAUSES if stats[f"export_refused_{c}"]), "")
    if not cause:
        return False, f"not recorded in {table}: the service did not answer in time; run the command again"
    return False, f"not recorded in {table}: {detail}; {_ADVICE[cause]}"
