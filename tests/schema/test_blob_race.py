"""Two uploads of one new blob that both find it absent (two collectors on one server, or one collector's check
racing another's insert) store one index row and one content row: their inserts carry the same deduplication token
(``blob:<digest>``, ``blobidx:<digest>``), so the engine drops the second block whatever its ``ts``, ``kind`` or
host. The window is forced: each upload runs the real ``has_blob``, then waits until the other has too.
"""

from __future__ import annotations

import hashlib
import threading

import pytest

from inferensics.schema.store import Store


def test_two_uploads_that_both_find_a_new_blob_absent_store_it_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"guard tree uploaded by two hosts at once\n"
    digest = hashlib.sha256(data).hexdigest()
    checked = threading.Barrier(2)
    real_has_blob = store.has_blob
    seen: list[bool] = []

    def has_blob_then_wait(sha256: str) -> bool:
        found = real_has_blob(sha256)
        seen.append(found)
        checked.wait(timeout=60)  # neither inserts before both have checked
        return found

    monkeypatch.setattr(store, "has_blob", has_blob_then_wait)
    errors: list[BaseException] = []

    def upload(host: str, kind: str) -> None:
        try:
            store.put_blob(data, kind, host=host)
        except BaseException as exc:  # surfaced below: a thread's failure would otherwise pass unseen
            errors.append(exc)

    threads = [
        threading.Thread(target=upload, args=("host-a", "guard_tree")),
        threading.Thread(target=upload, args=("host-b", "guard_tree")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert seen == [False, False]  # both went through the window
    db = store.database
    assert store.query_rows(f"SELECT count() FROM {db}.blobs WHERE sha256 = {{h:String}}", {"h": digest}) == [(1,)]
    assert store.query_rows(f"SELECT count() FROM {db}.blob_contents WHERE sha256 = {{h:String}}", {"h": digest}) == [
        (1,)
    ]
    assert store.get_blob(digest) == data
