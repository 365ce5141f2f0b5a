"""Blob upload to the collector service: ``PUT {service}/api/v1/blobs/{sha256}?kind=<kind>``.

Blobs (kernel sources, graphs, captured inputs) are content-addressed: ``put_blob`` returns the digest at
once and the upload runs on this sender's own thread, so neither the SDK's background thread nor a caller's
``flush`` waits on the network. A service that cannot be reached turns the sender off for
:data:`DOWN_BACKOFF_S` (the uploads meanwhile are refused as ``down`` and counted without a try), so a
service that accepts connections and never answers costs one timeout per back-off, not one per blob.
"""

from __future__ import annotations

import hashlib
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlencode

from inferensics.collector.host.export_health import HELD_AT_EXIT

if TYPE_CHECKING:
    from inferensics.collector.host.export_health import ExportHealth

DOWN_BACKOFF_S: Final = 5.0
"""Seconds after an upload found the service down before the next try: the blob (and those queued behind it) wait
in the queue meanwhile, as spans are held, and are refused only at shutdown or when the queue is full."""
QUEUE_BLOBS: Final = 1024
"""Blobs waiting for upload at most; beyond that a blob is refused (``back_pressure``) and counted."""
QUEUE_BYTES: Final = 256 * 1024 * 1024
"""Bytes waiting for upload at most (captured inputs can be large); beyond that as :data:`QUEUE_BLOBS`."""


class BlobSender:
    """Uploads content-addressed blobs once each (remembers recent digests) on its own thread; every
    refusal is counted by cause in ``health``."""

    def __init__(
        self, service_url: str, token: str | None, *, timeout_s: float = 10.0, health: ExportHealth | None = None
    ) -> None:
        self.health = health
        self.base = service_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self._sent: OrderedDict[str, None] = OrderedDict()
        self._queued: dict[str, None] = {}  # digests waiting (a second put of the same bytes is not queued)
        self._queue: deque[tuple[str, bytes, str]] = deque()
        self._queue_bytes = 0
        self._down_until = 0.0
        self._cond = threading.Condition()
        self._started = 0  # blobs taken for upload so far (queued)
        self._settled = 0  # of them uploaded, refused, or held for the service to come back
        self._held: set[str] = set()  # digests put back in the queue after the service was unreachable (settled)
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.failed = 0
        self.last_error = ""

    def put_blob(self, data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
        """Queue the bytes for upload (raw body, bearer token); returns their sha256 whether or not the upload
        will work (a refusal is counted in ``health``, and the record keeps the digest)."""
        digest = hashlib.sha256(data).hexdigest()
        with self._cond:
            if digest in self._sent or digest in self._queued:
                return digest
            if self._stopping:
                reason = "the exporter is shut down"
            elif len(self._queue) >= QUEUE_BLOBS or self._queue_bytes + len(data) > QUEUE_BYTES:
                reason = f"{len(self._queue)} blobs ({self._queue_bytes} bytes) already wait for upload"
                if time.monotonic() < self._down_until:
                    reason += " while the service is unreachable"
            else:
                reason = ""
                self._queue.append((digest, data, kind))
                self._queued[digest] = None
                self._queue_bytes += len(data)
                self._started += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="inferensics-blob-upload", daemon=True)
                    self._thread.start()
                self._cond.notify_all()
        if reason:
            down = self._stopping or "unreachable" in reason
            self._refused("down" if down else "back_pressure", reason)
        return digest

    @property
    def held(self) -> int:
        """Blobs waiting for an unreachable service to answer again (tried once and put back in the queue)."""
        return len(self._held)

    def retry_now(self) -> None:
        """Try the blobs held in an outage at once (a flush or a shutdown), not at the end of the back-off."""
        with self._cond:
            if self._held:
                self._down_until = 0.0
                self._cond.notify_all()

    def wait_sent(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` for every blob queued so far to be uploaded or refused; whether they were. In an
        outage (a blob held, the next try not due) it returns at once: the queue waits for the service, not for it."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            target = self._started
            while self._settled < target:
                if self._held and time.monotonic() < self._down_until:  # an outage: the queue waits behind them
                    return False
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._cond.wait(left)
        return True

    def shutdown(self, timeout_s: float) -> None:
        """Upload what is queued for at most ``timeout_s``, then stop; what is still queued is refused (counted)."""
        self.retry_now()
        self.wait_sent(timeout_s)
        with self._cond:
            self._stopping = True
            left = list(self._queue)
            self._queue.clear()
            self._queued.clear()
            self._queue_bytes = 0
            self._settled += sum(digest not in self._held for digest, _, _ in left)
            self._held.clear()
            self._cond.notify_all()
        if left:
            self._refused("down", f"{len(left)} blobs still waiting for upload at shutdown", len(left))

    # --- the upload thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and (not self._queue or time.monotonic() < self._down_until):
                    self._cond.wait(max(self._down_until - time.monotonic(), 0.05) if self._queue else None)
                if self._stopping:
                    return
                digest, data, kind = self._queue.popleft()
                self._queue_bytes -= len(data)
            down, newly_held = "", False
            try:
                down = self._upload(digest, data, kind)
            finally:
                with self._cond:
                    if down and not self._stopping:  # back at the head of the queue, for the next try
                        self._queue.appendleft((digest, data, kind))
                        self._queue_bytes += len(data)
                        if digest not in self._held:
                            newly_held = True
                            self._held.add(digest)
                            self._settled += 1
                    else:
                        self._queued.pop(digest, None)
                        if digest in self._held:
                            self._held.discard(digest)
                        else:
                            self._settled += 1
                    self._cond.notify_all()
            if newly_held and self.health is not None:
                self.health.held("blobs", 1, down, f"up to {QUEUE_BLOBS} blobs")
            elif down and self._stopped():  # the sender stopped meanwhile: shutdown counted the queue, not this one
                self._refused("down", HELD_AT_EXIT)

    def _stopped(self) -> bool:
        """Whether ``shutdown`` has begun (a call, so that a check made earlier on this thread is not assumed)."""
        return self._stopping

    def _upload(self, digest: str, data: bytes, kind: str) -> str:
        """Upload one blob; ``""`` when done (delivered or refused, counted), else why the service could not be
        reached: the blob is held for another try."""
        query = urlencode({"kind": kind})
        req = urllib.request.Request(f"{self.base}/api/v1/blobs/{digest}?{query}", data=data, method="PUT")
        req.add_header("Content-Type", "application/octet-stream")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                resp.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            cause = _cause(exc)
            if cause == "down" and not self._stopping:
                self._down_until = time.monotonic() + DOWN_BACKOFF_S
                return f"{type(exc).__name__}: {exc}"
            self._refused(cause, f"{type(exc).__name__}: {exc}")
            return ""
        self._down_until = 0.0
        with self._cond:
            self.sent += 1
            self._sent[digest] = None
            while len(self._sent) > 100_000:
                self._sent.popitem(last=False)
        if self.health is not None:
            self.health.delivered("blobs", 1)
        return ""

    def _refused(self, cause: str, detail: str, n: int = 1) -> None:
        with self._cond:
            self.failed += n
            self.last_error = detail
        if self.health is not None:
            self.health.refuse(cause, "blobs", n, detail)


def _cause(exc: BaseException) -> str:
    from inferensics.collector.host.export_health import cause_of_status

    if isinstance(exc, urllib.error.HTTPError):
        return cause_of_status(exc.code) or "rejected"
    return "down" if isinstance(exc, urllib.error.URLError | OSError) else "rejected"
