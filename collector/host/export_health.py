"""What the export could not deliver, and why: refusals counted by cause, each cause logged once with
what to do about it.

A refused export used to show only as one OpenTelemetry line on stderr while ``stats()`` looked clean.
Causes: ``auth`` (HTTP 401/403: the token), ``down`` (the service cannot be reached), ``back_pressure``
(HTTP 429/502/503/504: the service sheds load), ``rejected`` (any other answer). The cause of a span
export is the last answer of :class:`~inferensics.collector.host.otlp_poster.OtlpPoster`'s POST.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from typing import Final

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


TRANSIENT_STATUS: Final = frozenset({401, 403, 404, 405, 408, 409, 413, 429})
"""4xx answers that a later try may pass: the token (an operator fixes it), the endpoint (a URL or a service being
deployed), a timeout or conflict, a body too large (another batch may be smaller), back-pressure."""
_HTTP_STATUS: Final = re.compile(r"^HTTP (\d{3})\b")


def refused_for_good(cause: str, detail: str) -> bool:
    """Whether a refusal (``cause``, ``detail`` as :class:`ExportHealth` gets them) is final for the records refused:
    sent again they would be refused again (a record not encodable, an HTTP 4xx other than
    :data:`TRANSIENT_STATUS`, such as a 400 for a malformed body). The service down, shedding load (429, 5xx),
    refusing the token (401/403) or an answer that says nothing (no HTTP status) may pass on a later try."""
    if cause != "rejected":
        return False
    if detail.startswith(SPAN_NOT_BUILT):
        return True
    status = _HTTP_STATUS.match(detail)
    return status is not None and 400 <= int(status.group(1)) < 500 and int(status.group(1)) not in TRANSIENT_STATUS


SPAN_NOT_BUILT: Final = "span not built"
"""The detail's start of a record refused (``rejected``) because it could not be encoded as a span."""
HELD_AT_EXIT: Final = "held for the service, which did not answer again before the exporter stopped"
"""The detail of records an exporter held in an outage and counted as refused when it stopped."""


class ExportHealth:
    """Counters of one exporter's deliveries and refusals (spans and blobs), shared by its threads."""

    def __init__(self, service_url: str) -> None:
        self.service_url = service_url
        self.sent: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.last_error = ""
        self._logged: set[str] = set()
        self._refused_since: Counter[str] = Counter()  # refusals since the last delivery
        self._held_since: Counter[str] = Counter()  # items held back for the service to come back, since then
        self._lock = threading.Lock()

    def delivered(self, what: str, n: int) -> None:
        """``n`` items of ``what`` (``spans``, ``blobs``) were accepted. The first delivery after refusals says
        so in one line, and the next refusal of any cause is logged again (each outage is seen, not only the
        first of the process)."""
        with self._lock:
            self.sent[what] += n
            refused, self._refused_since = self._refused_since, Counter()
            held, self._held_since = self._held_since, Counter()
            if refused or held:
                self._logged.clear()
        if refused or held:
            parts = (
                [f"held meanwhile and sent now: {', '.join(f'{n} {w}' for w, n in sorted(held.items()))}"]
                if held
                else []
            )
            if refused:
                parts.append(
                    "refused meanwhile: "
                    + ", ".join(f"{n} {key.replace('_', ' ', 1)}" for key, n in sorted(refused.items()))
                )
            log.warning(
                "inferensics: the collector service at %s accepts exports again (%s).",
                self.service_url,
                "; ".join(parts),
            )

    def held(self, what: str, n: int, detail: str, limit: str) -> None:
        """``n`` items of ``what`` could not be delivered because the service is unreachable and are held to be
        sent when it answers again (``limit``: how much is held at most); the first of an outage is logged."""
        with self._lock:
            self._held_since[what] += n
            self.last_error = f"{what} held (down): {detail}"[:500]
            first = "held" not in self._logged
            self._logged.add("held")
        if first:
            hold = f"holding records until it answers again ({limit}; beyond that the oldest are dropped, counted)"
            log.error("inferensics: %s", self.advice("down", detail).replace("records are being dropped", hold))

    def refuse(self, cause: str, what: str, n: int, detail: str) -> None:
        """``n`` items of ``what`` were not delivered for ``cause``; the first of each cause is logged."""
        with self._lock:
            self.refused[f"{what}_{cause}"] += n
            self._refused_since[f"{what}_{cause}"] += n
            self.last_error = f"{what} refused ({cause}): {detail}"[:500]
            first = cause not in self._logged
            self._logged.add(cause)
        if first:
            log.error("inferensics: %s", self.advice(cause, detail))

    def not_encoded(self, what: str, n: int, detail: str) -> None:
        """``n`` items of ``what`` could not be encoded here and were never sent: refused (``rejected``), logged the
        first time, but no sign of the service (the next delivery does not say it accepts exports again)."""
        with self._lock:
            self.refused[f"{what}_rejected"] += n
            self.last_error = f"{what} refused (rejected): {detail}"[:500]
            first = SPAN_NOT_BUILT not in self._logged
            self._logged.add(SPAN_NOT_BUILT)
        if first:
            log.error("inferensics: %s", self.advice("rejected", detail))

    def advice(self, cause: str, detail: str) -> str:
        """One line: what happened and what to do."""
        url = self.service_url
        if cause == "auth":
            return (
                f"the collector service at {url} refused the SDK's token ({detail}); records are being dropped. "
                f"Set ${TOKEN_ENV} (or instrument(token=...)) to a token the service accepts for ingest."
            )
        if cause == "down" and detail.startswith(HELD_AT_EXIT):
            return (
                f"records held for the collector service at {url}, unreachable, were dropped ({detail}): they are "
                "counted as refused (down). Keep the service up while a serving process stops, or stop it later."
            )
        if cause == "down" and "SSL" in detail:
            return (
                f"the collector service at {url} did not complete a TLS handshake ({detail}); records are being "
                "dropped. `inferensics serve` speaks plain HTTP: use an http:// URL unless a TLS proxy is in front "
                "of the service."
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
        if detail.startswith(SPAN_NOT_BUILT):
            return (
                f"a record could not be encoded as an OTLP span for {url} ({detail[:300]}); it is dropped, counted in "
                "stats() as export_refused_rejected and export_span_errors. Report it with the record's values."
            )
        if any(f"{kind} {code}" in detail for kind in ("HTTP", "Error") for code in (404, 405)):
            return (
                f"{url} has no such endpoint ({detail}); those records are dropped. Give the collector service's "
                "base URL (http://host:port, without /v1/traces), and check that it is an inferensics service."
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
