"""Blob upload to the collector service: ``PUT {service}/api/v1/blobs/{sha256}?kind=<kind>``."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlencode

if TYPE_CHECKING:
    from inferensics.collector.host.export_health import ExportHealth


class BlobSender:
    """Uploads content-addressed blobs once each (remembers recent digests); failures are counted."""

    def __init__(
        self, service_url: str, token: str | None, *, timeout_s: float = 10.0, health: ExportHealth | None = None
    ) -> None:
        self.health = health
        self.base = service_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self._sent: OrderedDict[str, None] = OrderedDict()
        self.sent = 0
        self.failed = 0
        self.last_error = ""

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """PUT the bytes (raw body, bearer token); returns the sha256 whether or not the upload worked."""
        digest = hashlib.sha256(data).hexdigest()
        if digest in self._sent:
            return digest
        query = urlencode({"kind": kind})
        req = urllib.request.Request(f"{self.base}/api/v1/blobs/{digest}?{query}", data=data, method="PUT")
        req.add_header("Content-Type", "application/octet-stream")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                resp.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self.failed += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            if self.health is not None:
                self.health.refuse(_cause(exc), "blobs", 1, self.last_error)
            return digest
        self.sent += 1
        if self.health is not None:
            self.health.delivered("blobs", 1)
        self._sent[digest] = None
        while len(self._sent) > 100_000:
            self._sent.popitem(last=False)
        return digest


def _cause(exc: BaseException) -> str:
    from inferensics.collector.host.export_health import cause_of_status

    if isinstance(exc, urllib.error.HTTPError):
        return cause_of_status(exc.code) or "rejected"
    return "down" if isinstance(exc, urllib.error.URLError | OSError) else "rejected"
