"""The service's own metrics, exposed in the Prometheus text format at ``/metrics``.

Hand-rolled (counters, gauges and one histogram) so the service needs no metrics library; names follow
Prometheus conventions with the ``inferensics_collector_`` prefix. Every series is listed, with its type,
labels and meaning, in deploy/README.md ("Metrics"); ``tests/collector/service/test_metrics.py`` fails when a
series is added here and not there.

Each collector counts only what it did itself: scrape every collector (each pod, each container), never through
the load balancer in front of them, or the counters of different processes alternate under one series.
"""

from __future__ import annotations

import importlib.metadata
import socket
import threading
import time
from collections.abc import Callable
from typing import Final

from inferensics.schema.migrations import LATEST_VERSION

PREFIX: Final = "inferensics_collector_"
LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ROW_REASONS: Final = frozenset({"invalid_row", "out_of_range_time", "unknown_table", "api_only_table"})
"""Reasons of ``rejected`` that count rows the engine refused after the acknowledgement; every other reason counts
HTTP requests refused. Exported as the ``unit`` label (``row`` or ``request``), so a sum by unit means something."""


def package_version() -> str:
    """The installed inferensics distribution's version (``"unknown"`` when run from a tree that is not installed)."""
    try:
        return importlib.metadata.version("inferensics")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _number(value: float) -> str:
    """A sample value in full: ``{:g}`` kept six digits, so a counter past 999,999 read 1.23457e+06 and its
    rate() moved in steps of a thousand."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Thread-safe counters by name and label, gauges read on scrape, and the batch-latency histogram."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, str], float] = {}
        self._help: dict[str, str] = {}
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self._buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self._latency_sum = 0.0
        self._latency_count = 0
        for name, text in _COUNTERS.items():
            self._help[name] = text
        self._started = time.time()
        self._info = {"version": package_version(), "schema": str(LATEST_VERSION), "hostname": socket.gethostname()}

    def inc(self, name: str, value: float = 1, label: str = "") -> None:
        """Add ``value`` to counter ``name`` (``label`` is its ``reason`` or ``stage`` where it has one)."""
        with self._lock:
            key = (name, label)
            self._counters[key] = self._counters.get(key, 0) + value

    def get(self, name: str, label: str = "") -> float:
        """A counter's current value."""
        with self._lock:
            return self._counters.get((name, label), 0)

    def total(self, name: str) -> float:
        """A counter summed over its labels."""
        with self._lock:
            return sum(v for (n, _), v in self._counters.items() if n == name)

    def by_label(self, name: str) -> dict[str, float]:
        """A counter's value per label (its reasons), labels in sorted order, zero counts left out."""
        with self._lock:
            return {label: v for (n, label), v in sorted(self._counters.items()) if n == name and v}

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """Register a gauge read at scrape time."""
        self._gauges[name] = (help_text, read)

    def observe_batch(self, seconds: float) -> None:
        """Record one batch insert's latency."""
        with self._lock:
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    self._buckets[i] += 1
                    break
            else:
                self._buckets[-1] += 1
            self._latency_sum += seconds
            self._latency_count += 1

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4).

        A counter with a label has no series until its first labelled count: an unlabelled ``0`` beside the
        labelled series would go stale at the first count and read as a reset."""
        lines: list[str] = []
        with self._lock:
            counters = dict(self._counters)
            buckets, total, count = list(self._buckets), self._latency_sum, self._latency_count
        full = PREFIX + "build_info"
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in self._info.items())
        lines += [
            f"# HELP {full} Always 1; the labels name the release (version), the schema version it writes "
            "(schema) and the machine or pod (hostname).",
            f"# TYPE {full} gauge",
            f"{full}{{{labels}}} 1",
        ]
        full = PREFIX + "start_time_seconds"
        lines += [f"# HELP {full} When this collector process started, in Unix seconds.", f"# TYPE {full} gauge",
                  f"{full} {self._started:.3f}"]  # fmt: skip
        for name, text in self._help.items():
            full = PREFIX + name + "_total"
            lines += [f"# HELP {full} {text}", f"# TYPE {full} counter"]
            key = LABELS.get(name)
            if key is None:
                lines.append(f"{full} {_number(counters.get((name, ''), 0))}")
                continue
            for label, v in sorted((label, v) for (n, label), v in counters.items() if n == name):
                extra = f',unit="{"row" if label in ROW_REASONS else "request"}"' if name == "rejected" else ""
                lines.append(f'{full}{{{key}="{_escape(label)}"{extra}}} {_number(v)}')
        for name, (text, read) in self._gauges.items():
            full = PREFIX + name
            lines += [f"# HELP {full} {text}", f"# TYPE {full} gauge", f"{full} {_number(read())}"]
        full = PREFIX + "batch_latency_seconds"
        lines += [f"# HELP {full} Time to insert one batch into the store.", f"# TYPE {full} histogram"]
        cumulative = 0
        for bound, n in zip((*LATENCY_BUCKETS, float("inf")), buckets, strict=True):
            cumulative += n
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            lines.append(f'{full}_bucket{{le="{le}"}} {cumulative}')
        lines += [f"{full}_sum {_number(total)}", f"{full}_count {count}"]
        return "\n".join(lines) + "\n"


_COUNTERS: Final = {
    "received_spans": "Spans received in accepted OTLP requests.",
    "spooled_spans": "Spans fsynced into the spool (acknowledged).",
    "decoded_rows": "Rows the engine decoded from spooled spans and span events (written, duplicate or rejected).",
    "written_rows": "Rows inserted into the store.",
    "deduplicated_rows": "Rows of replayed batches that the store already had (dropped by the dedup token).",
    "dropped": "Items dropped without being stored, by reason (sdk_attributes, sdk_events: what senders' SDKs "
    "reported dropping through OTLP's dropped_*_count fields; truncated_value: a value cut, its row kept; "
    "unsupported_value: an attribute bound for attrs whose value is a kvlist or nested array; too_many_entries: "
    "map entries past 1024 a row; duplicate_key: an attribute whose key its span or event already had, which "
    "OTLP forbids: the first value is kept).",
    "rejected": "Refused items by reason and unit: unit=request counts HTTP requests refused (unauthorized, "
    "forbidden, malformed, too_large, unsupported_media, spool_full, uri_too_long, bad_digest, blob_digest, "
    "bad_blob_kind, bad_query, sql_refused), "
    "unit=row rows the engine refused after the acknowledgement (invalid_row, out_of_range_time, unknown_table, "
    "api_only_table: a span or span event of a table only the API writes, blobs or blob_contents).",
    "query_errors": "Named queries (and the listing of them) that failed with HTTP 500 (the service's or the "
    'engine\'s fault, not the caller\'s: refusals are rejected_total{reason="bad_query"|"sql_refused"}).',
    "unauthorized": "Requests refused with 401 (missing or unknown token) or 403 (role).",
    "store_errors": "Failed batch inserts and failed attempts to open or migrate the store (retried from the spool).",
    "spool_damaged_bytes": "Bytes of damaged spool records skipped on read (appends never acknowledged).",
    "redriven_segments": "Quarantined spool segments moved back into the spool and tried again.",
    "duplicate_spans": "Spans already in the store (or earlier in the same batch) and not stored again: retried "
    "requests within the dedup window.",
    "decode_pool_restarts": "Times the decode processes (decode_workers > 0) were started again after one died.",
    "writer_seconds": "Wall seconds the store writer spent per stage of the segments it wrote (parse, "
    "dedup_lookup, pivot, insert, dedup_keys): where ingest's time goes.",
    "quarantined_segments": "Spool segments moved to the spool's quarantine folder after the store refused their "
    "content repeatedly while it answered (kept on disk, re-driven automatically; the segments behind them are "
    "written).",
}
LABELS: Final = {"dropped": "reason", "rejected": "reason", "writer_seconds": "stage"}
"""The label of each labelled counter (the others have none)."""
