"""Which blobs are requests' captured inputs, answered from the blob index alone (keyed on sha256).

Captured inputs are users' tensors (tenant data): only a token with the ``replay`` role may read them. A blob is
captured inputs when it was uploaded under a kind of :data:`REPLAY_BLOB_KINDS`, or when any request names it as its
``capture_blob``, whatever kind its uploader gave it. The second used to be a ``count()`` over the whole
``requests`` table on every read; now both decoders, when they keep a request row naming a capture, also write a
*capture marker* to the blob index, and the read looks up two keys of that index.

A marker is its own ``blobs`` row under a key derived from the digest (:func:`marker_key`), never under the
digest itself: ``blobs`` is a ``ReplacingMergeTree`` ordered by ``sha256`` alone, so a marker under the blob's own
key would be merged away by the upload's row (or replace it, losing its size and media type), and the
drill-down's ``any(size_bytes)`` over the digest would read the marker's 0. Under its own key nothing but markers
of the same blob ever replaces it, whichever arrives first, the blob or the request row; the read counts any row
under the marker key, whatever its columns. Nothing but the decoders (and :func:`backfill_sql`) writes a marker:
both refuse ``inferensics.blobs`` spans (``schema/otlp.py``'s ``API_ONLY_MODELS``), and a blob uploaded under a
marker's key (its bytes the key's preimage) only adds a row there, which refuses more.

Request rows stored before markers existed have none: :func:`backfill_sql` writes theirs, once per service
process (one scan of ``capture_blob``, not one per read).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final

from inferensics.schema import columns as col
from inferensics.schema.events import BlobIndexEvent, RequestEvent
from inferensics.schema.store import Store
from inferensics.schema.table import Event

REPLAY_BLOB_KINDS: Final = frozenset({"inputs"})
"""Blob kinds only a token with the ``replay`` role (or admin) may read: the captured inputs of requests (users'
tensors, tenant data), which the host SDK stores as kind ``inputs`` and ``inferensics replay`` fetches. Other blobs
(generated code, pushed bundles) need ``read``: the dashboard shows them."""
MARKER_KIND: Final = "inputs_ref"
"""The ``kind`` of a capture marker: not a blob of its own but a request's reference to one."""
MARKER_OF: Final = "capture_of"
"""The marker's ``attrs`` entry naming the blob (its lower-case digest)."""
MARKER_PREFIX: Final = "inferensics.capture:"
"""Hashed with the digest into the marker's key: a preimage no real blob has."""
MARKER_MEDIA_TYPE: Final = ""
CAPTURE_COLUMNS: Final[Mapping[type[Event], str]] = {RequestEvent: col.CAPTURE_BLOB}
"""The column of each model whose rows name a captured-inputs blob."""
_BLOB_COLUMNS: Final = (col.TS, col.SHA256, col.SIZE_BYTES, col.KIND, col.MEDIA_TYPE, col.HOST, col.ATTRS)


def marker_key(digest: str) -> str:
    """The blob-index key of the marker saying that a request names ``digest`` as its captured inputs."""
    return hashlib.sha256((MARKER_PREFIX + digest.lower()).encode()).hexdigest()


def marker_key_sql(digest: str) -> str:
    """:func:`marker_key` of the SQL expression ``digest``."""
    return f"lower(hex(SHA256(concat('{MARKER_PREFIX}', lower({digest})))))"


def marker_row(digest: str, ts_us: int) -> dict[str, object]:
    """The marker of ``digest`` as ``blobs`` column values (``ts`` in microseconds, the request's time)."""
    return {
        col.TS: ts_us,
        col.SHA256: marker_key(digest),
        col.SIZE_BYTES: 0,
        col.KIND: MARKER_KIND,
        col.MEDIA_TYPE: MARKER_MEDIA_TYPE,
        col.HOST: "",
        col.ATTRS: {MARKER_OF: digest.lower()},
    }


def markers_insert_sql(db: str, model: type[Event], rows: str, keep: str, settings: str) -> str:
    """The ``INSERT ... SELECT`` of the markers of ``model``'s rows in the table ``rows`` that satisfy ``keep``."""
    digest = CAPTURE_COLUMNS[model]
    select = (
        f"{col.TS}, {marker_key_sql(digest)}, toUInt64(0), '{MARKER_KIND}', '{MARKER_MEDIA_TYPE}', '', "
        f"map('{MARKER_OF}', lower({digest}))"
    )
    return (
        f"INSERT INTO {db}.{BlobIndexEvent.TABLE.name} ({', '.join(_BLOB_COLUMNS)}){settings} "
        f"SELECT {select} FROM {rows} WHERE {keep} AND {digest} != ''"
    )


def backfill_sql(db: str) -> str:
    """The markers of stored request rows that have none (rows stored before markers were written)."""
    blobs = f"{db}.{BlobIndexEvent.TABLE.name}"
    digest = CAPTURE_COLUMNS[RequestEvent]
    return (
        f"INSERT INTO {blobs} ({', '.join(_BLOB_COLUMNS)}) "
        f"SELECT min({col.TS}), {marker_key_sql('d')} AS k, toUInt64(0), '{MARKER_KIND}', '{MARKER_MEDIA_TYPE}', "
        f"'', map('{MARKER_OF}', d) FROM (SELECT {col.TS}, lower({digest}) AS d FROM {db}.{RequestEvent.TABLE.name} "
        f"WHERE {digest} != '') GROUP BY d "
        f"HAVING k NOT IN (SELECT {col.SHA256} FROM {blobs} WHERE {col.KIND} = '{MARKER_KIND}')"
    )


def captured_inputs(store: Store, digest: str) -> bool:
    """Whether the blob ``digest`` is a request's captured inputs: uploaded under a kind of
    :data:`REPLAY_BLOB_KINDS` (case folded: older releases stored the kind as sent), or named by a request
    (its marker). Reads the index rows of two keys, however many requests the store holds."""
    rows = store.query_rows(
        f"SELECT count() FROM {store.database}.{BlobIndexEvent.TABLE.name} "
        f"WHERE {col.SHA256} IN ({{h:String}}, {{m:String}}) "
        f"AND ({col.SHA256} = {{m:String}} OR lower({col.KIND}) IN {{kinds:Array(String)}})",
        {"h": digest, "m": marker_key(digest), "kinds": sorted(REPLAY_BLOB_KINDS)},
    )
    return bool(rows and rows[0][0])
