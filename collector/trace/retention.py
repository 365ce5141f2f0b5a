"""Retention of imported rows: a log's records keep the time they were logged, and one older than its table's
retention would vanish on insert (ClickHouse drops it at its next merge). Such a record is left out and counted,
or stored at the import time with ``redate``, its own time kept in ``attrs['log_ts']``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from inferensics.schema import columns as col
from inferensics.schema.events import CompileEvent, KernelInventoryEvent
from inferensics.schema.table import Event

LOG_TS_ATTR = "log_ts"
"""Attribute of a row stored at the import time (``redate``): the time its log gave it (ISO 8601, UTC)."""


@dataclass
class Retained:
    """What :func:`apply_retention` kept, and what it left out or redated."""

    kept: list[Event] = field(default_factory=list)
    expired: Counter[str] = field(default_factory=Counter)
    """Rows left out, by table: older than the table's retention, or the kernels of such a compile."""
    retention: dict[str, int] = field(default_factory=dict)
    """Retention in days of each table in ``expired`` (0: the kernels of compiles left out)."""
    expired_span: tuple[datetime, datetime] | None = None
    """Oldest and newest time of the rows left out as older than their retention."""
    redated: Counter[str] = field(default_factory=Counter)
    """Rows older than their table's retention stored at the import time (``redate``), by table."""


def apply_retention(events: list[Event], *, redate: bool, now: datetime) -> Retained:
    """``events`` less those older than their table's retention as of ``now``; with ``redate`` those are kept at
    ``now`` instead, their own time in ``attrs['log_ts']``. A compile left out takes its kernels along."""
    out = Retained()
    left_out: list[Event] = []
    for e in events:
        ttl = type(e).TABLE.ttl_days
        ts = getattr(e, col.TS, None)
        if not ttl or not isinstance(ts, datetime) or ts >= now - timedelta(days=ttl):
            out.kept.append(e)
        elif redate:
            out.redated[type(e).TABLE.name] += 1
            update: dict[str, object] = {col.TS: now}
            if col.ATTRS in type(e).model_fields:
                update[col.ATTRS] = {**dict(getattr(e, col.ATTRS, {})), LOG_TS_ATTR: ts.isoformat()}
            out.kept.append(e.model_copy(update=update))
        else:
            left_out.append(e)
            out.expired[type(e).TABLE.name] += 1
            out.retention[type(e).TABLE.name] = ttl
            span = out.expired_span or (ts, ts)
            out.expired_span = (min(span[0], ts), max(span[1], ts))
    if left_out:
        # Kept for ever, the kernels of a compile left out would be stored again with it.
        graphs = {e.graph_key for e in left_out if isinstance(e, CompileEvent) and e.graph_key}
        graphs -= {e.graph_key for e in out.kept if isinstance(e, CompileEvent)}
        orphans = [e for e in out.kept if isinstance(e, KernelInventoryEvent) and e.graph_key in graphs]
        if orphans:
            out.expired[KernelInventoryEvent.TABLE.name] += len(orphans)
            out.retention[KernelInventoryEvent.TABLE.name] = 0
            out.kept = [e for e in out.kept if not (isinstance(e, KernelInventoryEvent) and e.graph_key in graphs)]
    return out
