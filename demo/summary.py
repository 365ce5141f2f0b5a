"""What the demo prints at the end: the incidents as the workers saw them and as the service reports them.

Expected counts come from the workers' own account (each request's outcome as predicted by
:class:`~inferensics.demo.serving.DispatchModel`, its error, its NaN count); observed counts come from the
collector service: the ``requests`` rows (read-only SQL) and the analytics named queries
``fallback_reasons``, ``recompile_storms`` and ``canary_compare``.
"""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from inferensics.analytics.storms import StormRule
from inferensics.collector.client import ServiceClient
from inferensics.dashboard._internal.links import (
    END_PARAM,
    KERNELS_PATH,
    canary_link,
    end_text,
    page_link,
    pinned_end,
    request_link,
)
from inferensics.dashboard._internal.replay_command import KEYRING_ENV
from inferensics.dashboard.launcher import DEFAULT_PORT
from inferensics.demo.workload import CANDIDATE, DECODER_MODEL, POOL_B

CANARY_MIN_REQUESTS = 100
"""The analytics default of ``min_requests``; lowered to what a short run served (and said so)."""
CANARY_MIN_PAIRS = 30
"""The analytics default of ``min_pairs``; lowered likewise."""
NAN_DRILL = "NaN logits, inputs captured"
"""The :func:`drill_ids` entry of the requests with NaN logits (their inputs captured: replay them)."""


@dataclass
class RunRecord:
    """Everything the workers reported, keyed by request id."""

    served: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each worker's ``served`` line (with ``worker``, ``bundle``, ``expected``, ``error``, ``nan``)."""
    worker_stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The SDK counters each worker reported when done."""
    bundle_ids: dict[str, str] = field(default_factory=dict)
    """Bundle name → bundle id."""
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When the run started (UTC)."""

    def expected_outcomes(self) -> Counter[str]:
        """Expected outcome → requests."""
        return Counter(r["expected"] for r in self.served.values())

    def incident_counts(self) -> dict[str, int]:
        """Counts per incident as the workers saw them."""
        s = list(self.served.values())
        storm = [r for r in s if r["incident"] == "storm"]
        return {
            "storm recompiles": sum(r["expected"] == "recompile" for r in storm),
            "fallbacks after the recompile limit": sum(r["expected"] == "fallback" for r in s),
            "failed requests (invalid token ids)": sum(r["incident"] == "invalid" for r in s),
            "requests with NaN logits": sum(r["nan"] > 0 for r in s),
            "canary requests (candidate bundle)": sum(r["bundle"] == CANDIDATE for r in s),
        }

    def ids(self, predicate: Any) -> list[str]:
        """Request ids (in id order) whose served line satisfies ``predicate``."""
        return sorted(rid for rid, r in self.served.items() if predicate(r))


def observed_requests(client: ServiceClient, since: datetime) -> pl.DataFrame:
    """The ``requests`` rows of this run (admin SQL; the demo's own service runs without authentication)."""
    ts = since.strftime("%Y-%m-%d %H:%M:%S")
    return client.sql(
        "SELECT request_id, bundle_id, hw_pool, model, outcome, fallback_reason, recompiles, status, fp_nan, "
        f"capture_blob != '' AS captured FROM requests WHERE ts >= toDateTime64('{ts}', 6, 'UTC')"
    )


def canary_thresholds(record: RunRecord, model: str = DECODER_MODEL) -> dict[str, int]:
    """``min_requests`` and ``min_pairs`` lowered to what the candidate served of ``model`` when a short run
    served fewer than the analytics defaults; empty when the defaults hold."""
    served = [r for r in record.served.values() if r["model"] == model and r["bundle"] == CANDIDATE]
    min_requests = max(1, min(CANARY_MIN_REQUESTS, len(served)))
    min_pairs = max(1, min(CANARY_MIN_PAIRS, len(served)))
    if min_requests == CANARY_MIN_REQUESTS and min_pairs == CANARY_MIN_PAIRS:
        return {}
    return {"min_requests": min_requests, "min_pairs": min_pairs}


def canary_window(record: RunRecord, now: datetime) -> tuple[datetime, datetime]:
    """The window the summary's canary verdict reads: from a minute before the run started to a minute after
    ``now`` (the run's requests, and nothing of an earlier run that ended over a minute before it)."""
    return record.started - timedelta(minutes=1), now + timedelta(minutes=1)


def canary_verdict(
    client: ServiceClient, record: RunRecord, model: str = DECODER_MODEL, *, now: datetime | None = None
) -> tuple[pl.DataFrame, str]:
    """Run ``canary_compare`` on pool ``cpu-b`` for ``model``, over :func:`canary_window` (``now`` defaults to
    the current time); returns the evidence and a note on thresholds.

    On a short run fewer requests than the analytics defaults need are served; the thresholds are then
    lowered to what was served (:func:`canary_thresholds`), and the note says so.
    """
    lowered = canary_thresholds(record, model)
    min_requests = lowered.get("min_requests", CANARY_MIN_REQUESTS)
    min_pairs = lowered.get("min_pairs", CANARY_MIN_PAIRS)
    note = ""
    if lowered:
        note = f"short run: min_requests={min_requests}, min_pairs={min_pairs} (defaults 100 and 30)"
    start, end = canary_window(record, now or datetime.now(UTC))
    frame = client.query(
        "canary_compare",
        model=model,
        hw_pool=POOL_B,
        baseline=record.bundle_ids["baseline"],
        candidate=record.bundle_ids[CANDIDATE],
        start=start,
        end=end,
        min_requests=min_requests,
        min_pairs=min_pairs,
    )
    return frame, note


def dashboard_links(record: RunRecord, dashboard_url: str, now: datetime) -> dict[str, str]:
    """The dashboard's pages that open on the run's findings, by what each shows: the canary comparison the
    summary's verdict made (:func:`canary_verdict` at ``now``: its bundles, model, pool, window and lowered
    thresholds), the drill-down of the first request with NaN logits and the Kernels page over the run."""
    links: dict[str, str] = {}
    baseline, candidate = record.bundle_ids.get("baseline"), record.bundle_ids.get(CANDIDATE)
    if baseline and candidate:
        lowered = canary_thresholds(record)
        start, end = canary_window(record, now)
        end = pinned_end(end)  # the link's end is to the minute: its window reaches back from there
        links["canary comparison"] = canary_link(
            dashboard_url, model=DECODER_MODEL, candidate=candidate, baseline=baseline, hw_pool=POOL_B,
            window=end - start, end=end,
            min_requests=lowered.get("min_requests"), min_pairs=lowered.get("min_pairs"),
        )  # fmt: skip
    nan = drill_ids(record).get(NAN_DRILL, [])
    if nan:
        links["NaN request"] = request_link(dashboard_url, nan[0])
    # Which kernel-registry provider served each op (on a CPU host: Inductor's code, Triton skipped, and why).
    links["kernel providers"] = page_link(dashboard_url, KERNELS_PATH, {END_PARAM: end_text(now)})
    return links


def drill_ids(record: RunRecord) -> dict[str, list[str]]:
    """Request ids worth opening in the dashboard's drill-down, by why."""
    picks = {
        "first compile": record.ids(lambda r: r["expected"] == "compile")[:1],
        "storm recompiles": record.ids(lambda r: r["expected"] == "recompile" and r["incident"] == "storm")[:3],
        "fallbacks (recompile limit)": record.ids(lambda r: r["expected"] == "fallback")[:3],
        "failed, inputs captured": record.ids(lambda r: bool(r["error"])),
        NAN_DRILL: record.ids(lambda r: r["nan"] > 0),
    }
    pairs = record.ids(lambda r: r["bundle"] == CANDIDATE and r["model"] == DECODER_MODEL)[:1]
    picks["canary pair (baseline / candidate)"] = [p.removesuffix("-c") for p in pairs] + pairs
    return {k: v for k, v in picks.items() if v}


def commands(
    service_url: str, record: RunRecord, dashboard_url: str, keyring: Path, *, store_dsn: str = ""
) -> list[str]:
    """The commands to try next, each runnable as printed: first the on-call ones the README starts with, the run's
    failing requests (``requests --failing``) and one of them opened (``requests --id``, :func:`requests_commands`);
    then the weekly report of the current week (its storm rule lowered to the run's storm when that is under the
    rule's floor), the canary comparison over the last 24 hours up to now (with the thresholds the summary's
    verdict used), status, and the replay of the NaN request (trusting the run's builder key).

    With ``store_dsn`` (the demo's own service stops when the demo exits) the requests, report, canary and status
    commands read that store directly (``--dsn``); replay and the dashboard need a service, so
    :func:`service_commands` gives those, after the command that starts one on the store. Without it they all
    go through the running service at ``service_url``.
    """
    target = f"--dsn {shlex.quote(store_dsn)}" if store_dsn else f"--service {service_url}"
    lowered = canary_thresholds(record)
    storm_floor = storm_floor_option(record)
    thresholds = "".join(f" --{k.replace('_', '-')} {v}" for k, v in lowered.items())
    out = [
        *requests_commands(target, record),
        f"inferensics report weekly {target}{storm_floor}",
        f"inferensics canary compare --baseline {record.bundle_ids.get('baseline', '?')} "
        f"--candidate {record.bundle_ids.get(CANDIDATE, '?')} --model {DECODER_MODEL} --hw-pool {POOL_B}"
        f"{thresholds} {target}",
        f"inferensics status {target}",
    ]
    if store_dsn:
        return out
    return out + service_commands(service_url, record, dashboard_url, keyring)


def requests_commands(target: str, record: RunRecord) -> list[str]:
    """Where on-call starts (the README's first step): the failing requests of the last 24 hours, the run's among
    them, and the drill-down of its first NaN request (else its first failed one) in the terminal; ``target`` is
    the ``--service URL`` or ``--dsn DSN`` they read through."""
    out = [f"inferensics requests --failing {target}"]
    picks = record.ids(lambda r: r["nan"] > 0)[:1] or record.ids(lambda r: bool(r["error"]))[:1]
    return out + [f"inferensics requests --id {rid} {target}" for rid in picks]


def storm_floor_option(record: RunRecord) -> str:
    """`` --min-recompiles N`` when the run's storm has fewer recompiles than the storm rule's floor for a
    fleet: the report's and the dashboard's rule are lowered to it, as the canary thresholds are, so that they
    find the storm the summary reports."""
    storm = record.incident_counts()["storm recompiles"]
    return f" --min-recompiles {storm}" if 0 < storm < StormRule().min_recompiles else ""


PRINTED_DASHBOARD_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
"""Where the dashboard the demo's printed ``inferensics dashboard`` command starts listens (it names the port)."""


def service_commands(service_url: str, record: RunRecord, dashboard_url: str, keyring: Path) -> list[str]:
    """The commands that need a running service at ``service_url``: the replay of the NaN request and, when
    the demo showed no dashboard, the one that starts it at :data:`PRINTED_DASHBOARD_URL` (its storm rule
    lowered as the report's, and the run's builder key in its environment, so that the request page's replay
    command runs as shown)."""
    out = []
    nan = drill_ids(record).get(NAN_DRILL, [])
    if nan:
        out.append(f"inferensics replay {nan[0]} --keyring {shlex.quote(str(keyring))} --service {service_url}")
    if not dashboard_url:
        out.append(
            f"{KEYRING_ENV}={shlex.quote(str(keyring))} inferensics dashboard --service {service_url} "
            f"--port {DEFAULT_PORT}{storm_floor_option(record)}"
        )
    return out
