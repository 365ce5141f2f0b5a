"""What ``Tracker.stats()`` reports: the counters it always has, and how they are gathered from the queue, the
background thread, the tracker's own counts, the kernel registry and the exporter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from inferensics.collector.host.export_health import CAUSES
from inferensics.collector.host.kernel_counts import kernel_registry_counts
from inferensics.schema import columns as col

if TYPE_CHECKING:
    from inferensics.collector.host.request_tracker import Tracker

ALWAYS_COUNTED: Final = (
    "dropped",
    "requests",
    "requests_recovered",
    "recovered_undelivered",  # left in their dead process's journal for the next tracker (tracker_journal)
    "recovered_rejected",  # refused for good by the destination: cleared from their journal (tracker_journal)
    "recovered_given_up",  # journals given up undelivered: too many recoveries, or too old (tracker_journal)
    "dead_processes",
    col.REQUESTS_LOST,  # also in the SDK's health records
    "fingerprint_unsampled",
    "fingerprint_errors",
    "fingerprint_output_modified",
    "fingerprint_backlogged",
    "captures",
    "capture_over_cap",
    "capture_errors",
    "shape_errors",
    "scope_errors",
    "process_errors",
    "export_errors",
    "journal_errors",
    "profiler_errors",
    "health_records",
    "health_errors",
    "export_spans_sent",
    "export_spans_held",
    *(f"export_refused_{cause}" for cause in CAUSES),
    "blobs_sent",
    "blobs_held",
    *(f"blobs_refused_{cause}" for cause in CAUSES),
    "bundle_hit_graphs",
    "bundle_miss_graphs",
    *(f"bundle_miss_{action}" for action in ("compiled", "eager", "refused")),
    "bundle_unqualified_shape_calls",
    "bundle_dynamic_overridden",  # dynamic=True given with a bundle built static: the bundle's options won
    "kernel_evidence_applied",
    "kernel_evidence_refused",
    "kernel_decisions",
)
"""Keys ``Tracker.stats()`` always has (0 until counted), whichever exporter: code can index them."""


def collect_stats(tracker: Tracker, *, trace_sink_errors: int, guard_hook_installed: bool) -> dict[str, int]:
    """``tracker``'s drop and activity counters (``Tracker.stats``); a replaced tracker's are its successor's.

    ``guard_hook_installed`` is 1 once Dynamo's guard-complete hook is in. While it is 0, guard hits and misses are
    still counted, from graph calls and recompiles (every compile so far gave a graph of the tracker's backend).
    """
    successor = tracker.successor
    if successor is not None and successor is not tracker:
        # A replaced tracker's scopes feed its successor's queue, pipeline and exporter, and the process's guard
        # hook is the successor's to install: its own hook state and sink are gone with its shutdown.
        return successor.stats()
    queue, pipeline, exporter = tracker.queue, tracker.pipeline, tracker.exporter
    out: dict[str, int] = dict.fromkeys(ALWAYS_COUNTED, 0)  # every documented counter, 0 until it counts
    out.update(queued=queue.accepted, queue_len=len(queue))
    out.update({f"dropped_{k}": v for k, v in queue.dropped.items()})
    out["dropped"] = sum(queue.dropped.values())
    out.update(pipeline.counters)
    for name, count in tracker.counters_local.items():  # both threads count e.g. fingerprint errors
        out[name] = out.get(name, 0) + count
    out["trace_sink_errors"] = trace_sink_errors
    out["guard_hook_installed"] = int(guard_hook_installed)
    # The kernel registry's provider exceptions, fallbacks to the reference and unproven compile-time choices.
    out.update(kernel_registry_counts())
    # Kernel source lines from a cache hit that named a file this process did not compile (see assembler).
    out["stale_source_lines"] = pipeline.assembler.stats.stale_source_lines
    # Rows an exporter could not write and dropped, per table (the store exporter keeps the rest).
    rejected: Mapping[str, int] = getattr(exporter, "rejected", {})
    out.update({f"export_rejected_{table}": n for table, n in rejected.items()})
    # What the service refused, by cause (auth, down, back_pressure, rejected): OTLP exporter only.
    exporter_stats = getattr(exporter, "stats", None)
    if callable(exporter_stats):
        try:
            out.update(exporter_stats())
        except Exception:
            out["exporter_stats_errors"] = out.get("exporter_stats_errors", 0) + 1
    return out
