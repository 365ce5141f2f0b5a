"""What the export could not deliver, and why: refusals counted by cause, each cause logged once with
what to do about it.

A refused export used to show only as one OpenTelemetry line on stderr while ``stats()`` looked clean.
Causes: ``auth`` (HTTP 401/403: the token), ``down`` (the service cannot be reached), ``back_pressure``
(HTTP 429/503: the service sheds load), ``rejected`` (any other answer). The OTLP exporter learns the
cause from an observed ``requests`` session (the exporter's public ``session=`` argument), so no private
part of OpenTelemetry is touched.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any, Final

import requests

from inferensics.collector.service_url import SERVICE_URL_ENV, TOKEN_ENV

log = logging.getLogger("inferensics.collector.host")

CAUSES: Final = ("auth", "down", "back_pressure", "rejected")
"""Why an export was refused, in the order ``stats()`` lists them."""


def cause_of_status(status: int) -> str:
    """The refusal cause of an HTTP status (``""`` for a success)."""
    if status < 300:
        return ""
    if status in (401, 403):
        return "auth"
    if status in (429, 502, 503, 504):
        return "back_pressure"
    return "rejected"


class ExportHealth:
    """Counters of one exporter's deliveries and refusals (spans and blobs), shared by its threads."""

    def __init__(self, service_url: str) -> None:
        self.service_url = service_url
        self.sent: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.last_error = ""
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def delivered(self, what: str, n: int) -> None:
        """``n`` items of ``what`` (``spans``, ``blobs``) were accepted."""
        with self._lock:
            self.sent[what] += n

    def refuse(self, cause: str, what: str, n: int, detail: str) -> None:
        """``n`` items of ``what`` were not delivered for ``cause``; the first of each cause is logged."""
        with self._lock:
            self.refused[f"{what}_{cause}"] += n
            self.last_error = f"{what} refused ({cause}): {detail}"[:500]
            first = cause not in self._logged
            self._logged.add(cause)
        if first:
            log.error("inferensics: %s", self.advice(cause, detail))

    def advice(self, cause: str, detail: str) -> str:
        """One line: what happened and what to do."""
        url = self.service_url
        if cause == "auth":
            return (
                f"the collector service at {url} refused the SDK's token ({detail}); records are being dropped. "
                f"Set ${TOKEN_ENV} (or instrument(token=...)) to a token the service accepts for ingest."
            )
        if cause == "down":
            return (
                f"cannot reach the collector service at {url} ({detail}); records are being dropped. "
                f"Start it (inferensics serve) or point ${SERVICE_URL_ENV} at it."
            )
        if cause == "back_pressure":
            return (
                f"the collector service at {url} is shedding load ({detail}); records are being dropped. "
                "Give the service more capacity or spool room, or export less (sample_rate, capture)."
            )
        return (
            f"the collector service at {url} rejected an export ({detail}); those records are dropped. "
            "Check that the SDK and the service are the same inferensics version."
        )

    def stats(self) -> dict[str, int]:
        """``export_spans_sent``, ``export_refused_<cause>`` (spans) and ``blobs_refused_<cause>``."""
        with self._lock:
            out = {"export_spans_sent": self.sent["spans"], "blobs_sent": self.sent["blobs"]}
            for cause in CAUSES:
                out[f"export_refused_{cause}"] = self.refused[f"spans_{cause}"]
                out[f"blobs_refused_{cause}"] = self.refused[f"blobs_{cause}"]
            return out


OTLP_EXPORTER_LOGGER: Final = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
"""The logger OpenTelemetry's OTLP/HTTP span exporter reports each failed batch and retry on."""


class HeldExporterLines(logging.Filter):
    """Holds back the OTLP exporter's own log lines while one of our exports runs on this thread.

    OpenTelemetry logs every refused batch (``Failed to export span batch code: 401``) on every retry;
    :class:`ExportHealth` already counts each refusal and logs each cause once with what to do, so those
    lines only repeat it. Lines from exports that are not ours (the host's own OTLP pipeline on another
    thread) pass untouched; a held line becomes the refusal's detail when the HTTP answer gives none.
    """

    def __init__(self) -> None:
        super().__init__()
        self._held = threading.local()

    def hold(self) -> None:
        """Start holding this thread's exporter lines."""
        self._held.lines = []

    def release(self) -> list[str]:
        """Stop holding; the lines held since :meth:`hold`."""
        lines: list[str] = getattr(self._held, "lines", None) or []
        self._held.lines = None
        return lines

    def filter(self, record: logging.LogRecord) -> bool:
        """Pass the record unless this thread is inside one of our exports."""
        lines = getattr(self._held, "lines", None)
        if lines is None:
            return True
        lines.append(record.getMessage()[:300])
        return False


HELD_EXPORTER_LINES: Final = HeldExporterLines()
logging.getLogger(OTLP_EXPORTER_LOGGER).addFilter(HELD_EXPORTER_LINES)


class ObservedSession(requests.Session):
    """A ``requests`` session that remembers, per thread, how its last request ended."""

    def __init__(self) -> None:
        super().__init__()
        self._last = threading.local()

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        """Send as ``requests`` does; note the status, or the connection failure."""
        try:
            verb = method if isinstance(method, str) else method.decode()
            response = super().request(verb, url if isinstance(url, str) else url.decode(), *args, **kwargs)
        except requests.RequestException as exc:
            self._last.outcome = ("down", f"{type(exc).__name__}")
            raise
        status = response.status_code
        reason = (response.reason or "").strip()
        self._last.outcome = (cause_of_status(status), f"HTTP {status} {reason}".strip())
        return response

    def last_outcome(self) -> tuple[str, str]:
        """``(cause, detail)`` of this thread's last request (``("", ...)`` for a success)."""
        outcome: tuple[str, str] = getattr(self._last, "outcome", ("rejected", "no answer"))
        return outcome
