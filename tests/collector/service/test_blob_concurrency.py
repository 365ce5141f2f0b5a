"""Concurrent uploads of one new blob, against a real service process on loopback: one index row, one content row.

Both uploads may find the blob absent; what keeps the second from adding a row is the service taking one upload at a
time (its query lock) and, under it, the store's check and the insert's deduplication token (``blobidx:<digest>``).
The rows are counted without ``FINAL``: a ``ReplacingMergeTree`` would hide a duplicate only after a merge, and
until then every ``count()`` over the index (the status page's row counts, the capture check) would see two.
"""

from __future__ import annotations

import hashlib
import threading

import httpx

from tests.collector.service.harness import ADMIN, INGEST, RunningService

UPLOADERS = 2
"""Two uploads, as the brief's race: each one's PUT is sent when both are ready."""


def _upload(url: str, digest: str, data: bytes, ready: threading.Barrier, answers: list[int]) -> None:
    with httpx.Client(timeout=60) as client:
        ready.wait(timeout=60)
        r = client.put(
            f"{url}/api/v1/blobs/{digest}",
            params={"kind": "output_code", "media_type": "text/x-python"},
            content=data,
            headers={"Authorization": f"Bearer {INGEST}", "Content-Type": "application/octet-stream"},
        )
        answers.append(r.status_code)


def _rows(svc: RunningService, table: str, digest: str) -> int:
    frame = svc.client(ADMIN).sql(f"SELECT count() AS n FROM inferensics.{table} WHERE sha256 = '{digest}'")
    return int(frame["n"][0])


def test_two_concurrent_uploads_of_one_new_blob_store_one_index_row(service: RunningService) -> None:
    data = b"def kernel(x):\n    return x * 2  # uploaded twice at once\n"
    digest = hashlib.sha256(data).hexdigest()
    ready = threading.Barrier(UPLOADERS)
    answers: list[int] = []
    threads = [
        threading.Thread(target=_upload, args=(service.url, digest, data, ready, answers)) for _ in range(UPLOADERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert answers == [201] * UPLOADERS
    assert _rows(service, "blobs", digest) == 1
    assert _rows(service, "blob_contents", digest) == 1
    assert service.client(ADMIN).get_blob(digest) == data
    assert service.client(ADMIN).status()["store"]["row_counts"]["blobs"] == 1
