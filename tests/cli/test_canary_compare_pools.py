"""``canary compare`` compares like for like, as the dashboard's canary page does, and says so: the pool both
bundles served (or a refusal naming the pools), that pool in its Markdown and HTML, and each outcome's rule
beside the verdict in the terminal.

The store holds the demo walk's canary (tests/dashboard/canary_pools.py): the baseline serves cpu-a (fast) and
cpu-b, the candidate cpu-b only, as fast as the baseline there.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.analytics.canary_history import VerdictHistoryParams, recorded_verdicts
from inferensics.cli.app import app
from inferensics.schema import RequestEvent
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.collector.service.harness import ADMIN, new_service
from tests.dashboard.canary_pools import BASELINE, BASELINE_ONLY_POOL, CANDIDATE, MODEL, SHARED_POOL, build
from tests.seeding import seed

NOW = datetime.now(UTC).replace(second=0, microsecond=0)
ROOT = Path(__file__).resolve().parents[2]


def _compare(store: Store, chdb_dir: Path, *extra: str) -> tuple[int, str]:
    dsn = f"chdb://{chdb_dir}?database={store.database}"
    window = ["--start", f"{NOW - timedelta(hours=2):%Y-%m-%dT%H:%M}", "--end", f"{NOW:%Y-%m-%dT%H:%M}"]
    args = ["canary", "compare", "--baseline", BASELINE[:12], "--candidate", CANDIDATE[:12], *window, "--dsn", dsn]
    result = CliRunner().invoke(app, [*args, *extra], env={"COLUMNS": "300"})
    return result.exit_code, result.output


def test_without_hw_pool_it_compares_the_pool_both_bundles_served(store: Store, chdb_dir: Path, tmp_path: Path) -> None:
    """Without --hw-pool the baseline mixed cpu-a and cpu-b against a cpu-b-only candidate (its p50 "failed" on
    hardware alone), while the dashboard compared cpu-b; the Markdown and HTML named no pool."""
    facts = build(NOW)
    seed(store, events=[*facts.requests, *facts.others])
    code, output = _compare(store, chdb_dir, "--out", str(tmp_path))
    assert code == 0, output  # like for like: every check passes
    baseline_only = facts.served(BASELINE, BASELINE_ONLY_POOL)
    assert (
        f"hardware pool {SHARED_POOL}: where both bundles served (baseline {facts.served(BASELINE, SHARED_POOL)}, "
        f"candidate {facts.served(CANDIDATE, SHARED_POOL)} requests); left out: {BASELINE_ONLY_POOL} (only the "
        f"baseline served there: {baseline_only} requests)" in output
    )
    (md,) = tmp_path.glob("*.md")
    (page,) = tmp_path.glob("*.html")
    assert f"hardware pool {SHARED_POOL}" in md.read_text().splitlines()[0]
    assert f"hardware pool {SHARED_POOL}" in page.read_text()

    code, mixed = _compare(store, chdb_dir, "--hw-pool", "all")
    assert code == 1, mixed  # every pool at once: the baseline's fast pool makes the candidate's p50 fail
    assert "every hardware pool" in mixed
    assert f"mixed, {BASELINE_ONLY_POOL} (only the baseline served there" in mixed


def test_the_terminal_shows_the_rule_of_each_outcome(store: Store, chdb_dir: Path) -> None:
    """The table showed ``D = 0.248 | D ≤ 0.1 | pass`` with the rule (fail only if also p < 0.01) in the
    Markdown alone."""
    facts = build(NOW)
    seed(store, events=[*facts.requests, *facts.others])
    _, output = _compare(store, chdb_dir, "--hw-pool", SHARED_POOL)
    assert "rules (each outcome above follows its metric's):" in output
    assert "  fp_mean_ks, fp_std_ks: KS D > 0.1 with p < 0.01 fails" in output
    latency_rule = "ratio CI low > 1.1 fails; CI high <= 1.1 passes"
    n = facts.served(BASELINE, SHARED_POOL)
    assert (
        f"  p50_ms, p95_ms, p99_ms: latency over requests that did not compile: baseline {n} of {n}, candidate "
        f"{facts.served(CANDIDATE, SHARED_POOL)} of {facts.served(CANDIDATE, SHARED_POOL)}; {latency_rule}" in output
    )


def test_bundles_that_share_no_pool_are_refused_in_one_line(store: Store, chdb_dir: Path) -> None:
    facts = build(NOW)
    apart = [r for r in facts.requests if not (r.bundle_id == BASELINE and r.hw_pool == SHARED_POOL)]
    seed(store, events=[*apart, *facts.others])
    code, output = _compare(store, chdb_dir)
    assert code == 2, output
    baseline_only = facts.served(BASELINE, BASELINE_ONLY_POOL)
    assert (
        output.strip()
        .splitlines()[-1]
        .endswith(
            f"the bundles served no hardware pool in common (baseline: {BASELINE_ONLY_POOL} ({baseline_only}); "
            f"candidate: {SHARED_POOL} ({facts.served(CANDIDATE, SHARED_POOL)}) requests): pass --hw-pool POOL to "
            "compare one, or --hw-pool all to compare across pools (the hardware's difference then counts)"
        )
    )


SLOW_POOL = "cpu-c"
"""A second pool both bundles served, where the candidate is twice as slow (and serves fewer requests)."""


def _with_a_slow_pool(facts_now: datetime) -> list[RequestEvent]:
    """The walk's requests plus :data:`SLOW_POOL`: 100 baseline requests at 20 ms, 99 candidate ones at 40 ms."""
    extra = [
        RequestEvent(request_id=f"req-slow-{bundle[0]}{i:03d}", ts=facts_now - timedelta(minutes=50 - i * 0.4),
                     host=f"{SLOW_POOL}-{bundle[0]}-0", model=MODEL, hw_pool=SLOW_POOL, traffic_class="interactive",
                     bundle_id=bundle, latency_ms=20.0 if bundle == BASELINE else 40.0)
        for bundle, n in ((BASELINE, 100), (CANDIDATE, 99))
        for i in range(n)
    ]  # fmt: skip
    return extra


def test_each_pool_both_bundles_served_is_judged_and_the_worst_decides(store: Store, chdb_dir: Path) -> None:
    """Walk 42 (D1): with two pools in common, the candidate's busiest (cpu-b, where it is as fast as the
    baseline) was judged alone and passed (exit 0), while on cpu-c the candidate took twice as long; which pool
    was judged turned on a request or two. Now each is judged, the worst verdict gates the exit status naming its
    pool, and one verdict per pool is recorded."""
    facts = build(NOW)
    seed(store, events=[*facts.requests, *_with_a_slow_pool(NOW), *facts.others])
    few = ("--min-requests", "50")  # the candidate's 99 requests on cpu-c get a verdict
    code, output = _compare(store, chdb_dir, *few)
    assert code == 1, output
    assert f"hardware pools {SHARED_POOL}, {SLOW_POOL}, each judged alone" in output.splitlines()[0]
    assert (
        f"hardware pools {SHARED_POOL}, {SLOW_POOL}: where both bundles served, each judged alone and the worst "
        f"verdict decides ({SHARED_POOL}: baseline 100, candidate 100 requests; {SLOW_POOL}: baseline 100, "
        f"candidate 99 requests); left out: {BASELINE_ONLY_POOL} (only the baseline served there" in output
    )
    lines = output.splitlines()
    assert f"hardware pool {SHARED_POOL}:" in lines
    assert f"hardware pool {SLOW_POOL}:" in lines
    verdicts = lines[lines.index("verdict per hardware pool:") :]
    assert (
        verdicts[1]
        == f"  {SHARED_POOL}: PASS (every check passed; p Holm–Bonferroni-adjusted for the 2 hardware pools judged)"
    )
    assert verdicts[2].startswith(f"  {SLOW_POOL}: FAIL (failed: p50_ms")
    assert verdicts[3].startswith(f"verdict: FAIL on hardware pool {SLOW_POOL} (failed: p50_ms")
    assert verdicts[4] == f"2 verdicts (one per hardware pool) recorded in {store.database}.canary_verdicts"
    recorded = recorded_verdicts(store, VerdictHistoryParams(model=MODEL))
    assert sorted(zip(recorded[col.HW_POOL], recorded[col.VERDICT], strict=True)) == [
        (SHARED_POOL, "pass"),
        (SLOW_POOL, "fail"),
    ]

    code, one = _compare(store, chdb_dir, *few, "--hw-pool", SHARED_POOL)  # one pool named: that pool alone
    assert code == 0, one
    assert "verdict per hardware pool:" not in one
    assert one.splitlines()[-2] == "verdict: PASS (every check passed)"
    code, every = _compare(store, chdb_dir, *few, "--hw-pool", "all")  # every pool at once, as before
    assert code == 1, every
    assert "every hardware pool" in every.splitlines()[0]


def test_two_windows_are_both_named_in_the_header(store: Store, chdb_dir: Path) -> None:
    """With --baseline-start/--baseline-end the header named the candidate's window only, so a bundle compared
    with itself over two weeks read as one window (walk 42)."""
    facts = build(NOW)
    seed(store, events=[*facts.requests, *facts.others])
    b_lo, b_hi = NOW - timedelta(hours=2), NOW - timedelta(hours=1)
    window = ["--baseline-start", f"{b_lo:%Y-%m-%dT%H:%M}", "--baseline-end", f"{b_hi:%Y-%m-%dT%H:%M}"]
    _, output = _compare(store, chdb_dir, "--hw-pool", SHARED_POOL, *window)
    header = output.splitlines()[0]
    c_lo = NOW - timedelta(hours=2)
    named = f"(baseline {b_lo:%Y-%m-%d %H:%M} to {b_hi:%Y-%m-%d %H:%M}, candidate {c_lo:%Y-%m-%d %H:%M} to "
    assert named in header, header


def _seed_in_own_process(dsn: str) -> None:
    """Seed the service's store before it starts (chDB opens one data directory per process)."""
    code = (
        "import sys; from datetime import datetime; "
        "from inferensics.schema.store import Store; from tests.seeding import seed; "
        "from tests.dashboard.canary_pools import build; "
        "from tests.cli.test_canary_compare_pools import _with_a_slow_pool; "
        "now = datetime.fromisoformat(sys.argv[2]); facts = build(now); "
        "store = Store.open(sys.argv[1]); "
        "seed(store, events=[*facts.requests, *_with_a_slow_pool(now), *facts.others]); store.close()"
    )
    subprocess.run([sys.executable, "-c", code, dsn, NOW.isoformat()], check=True, cwd=ROOT, timeout=300)


@pytest.mark.slow
def test_each_pool_is_judged_through_the_service_as_in_the_store(tmp_path: Path) -> None:
    """Several pools go to the service as one named query (``canary_compare_pools``, its ``hw_pools`` a list in
    the JSON body); the verdicts read as they do from the store."""
    svc = new_service(tmp_path)
    _seed_in_own_process(svc.dsn)
    window = ["--start", f"{NOW - timedelta(hours=2):%Y-%m-%dT%H:%M}", "--end", f"{NOW:%Y-%m-%dT%H:%M}"]
    args = ["canary", "compare", "--baseline", BASELINE[:12], "--candidate", CANDIDATE[:12], *window]
    with svc:
        result = CliRunner().invoke(
            app, [*args, "--min-requests", "50", "--service", svc.url, "--token", ADMIN], env={"COLUMNS": "300"}
        )
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    verdicts = lines[lines.index("verdict per hardware pool:") :]
    assert (
        verdicts[1]
        == f"  {SHARED_POOL}: PASS (every check passed; p Holm–Bonferroni-adjusted for the 2 hardware pools judged)"
    )
    assert verdicts[2].startswith(f"  {SLOW_POOL}: FAIL (failed: p50_ms")
    assert verdicts[3].startswith(f"verdict: FAIL on hardware pool {SLOW_POOL} (failed: p50_ms")
