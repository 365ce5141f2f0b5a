"""The demo walk's canary (walk 39) in a real browser: a baseline serving two hardware pools and its canary one.

Opened from the sidebar, the canary page compared every pool: the baseline's requests of the pool the canary never
ran on set its p50, and the candidate "failed" p50 on hardware alone. It now compares the pool where both bundles
served and names the pool it left out, and why; *All* still compares every pool, with a warning. The same
dashboard, started with the builders' keys (``$INFERENSICS_BUNDLE_KEYRING``), gives a replay command that runs as
shown on the request page.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from playwright.sync_api import Page, expect
from streamlit.testing.v1 import AppTest

from inferensics.analytics.canary import EVIDENCE_SCHEMA
from inferensics.analytics.canary_pools import PoolSplit
from inferensics.dashboard._internal.filters import ALL, NOW_KEY
from inferensics.dashboard._internal.replay_command import KEYRING_ENV
from inferensics.dashboard._internal.settings import TOKEN_STATE_KEY, URL_STATE_KEY
from inferensics.dashboard.launcher import APP_FILE
from inferensics.dashboard.views.canary import SHARED, bundle_label, like_for_like
from inferensics.schema import columns as col
from tests.collector.service.harness import READ, RunningService
from tests.dashboard.apptest import TIMEOUT_S, assert_clean, metric
from tests.dashboard.browser import PAGE_TIMEOUT_MS, range_end, screenshot, settle
from tests.dashboard.browser import metric as shown_metric
from tests.dashboard.canary_pools import (
    BASELINE,
    BASELINE_ONLY_POOL,
    CANDIDATE,
    FAILED_ID,
    SHARED_POOL,
    PoolFacts,
    build,
)
from tests.dashboard.conftest import running_dashboard, seeded_service
from tests.dashboard.test_request_replay_command import replay_params


def test_each_pool_both_bundles_served_is_judged_and_the_others_are_named() -> None:
    """Walk 42 (D1): only the candidate's busiest shared pool (cpu-c) was compared, cpu-b "left out", though a
    regression there was as much the release's."""
    split = PoolSplit(baseline={"cpu-a": 201, "cpu-b": 100, "cpu-c": 40}, candidate={"cpu-b": 60, "cpu-c": 70})
    pools, note = like_for_like(SHARED, split)
    assert pools == ["cpu-c", "cpu-b"]  # every pool both served, the candidate's busiest first
    assert note is not None
    kind, text = note
    assert kind == "info"
    assert text.startswith(
        "**Hardware pools cpu-c, cpu-b**, where both bundles served in this window, each judged alone (cpu-c: "
        "baseline 40, candidate 70 requests; cpu-b: baseline 100, candidate 60 requests)"
    )
    assert "the worst pool's verdict is the comparison's" in text
    assert "Left out: cpu-a (only the baseline served there: 201 requests)." in text
    one, _ = like_for_like(SHARED, PoolSplit(baseline={"cpu-a": 201, "cpu-b": 100}, candidate={"cpu-b": 60}))
    assert one == ["cpu-b"]


def _verdict_frame(verdict: str, rule: str, baseline: int, candidate: int) -> pl.DataFrame:
    """A pool's frame: the checks its rule names (a failed error rate with p 1e-6, which no correction for three
    pools passes) and its verdict row."""
    sizes = {"baseline": float(baseline), "candidate": float(candidate)}
    row = {k: None for k in EVIDENCE_SCHEMA} | {
        "check": "verdict",
        "metric": "requests",
        "outcome": verdict,
        "rule": rule,
    }
    named = rule.partition(": ")[2].split(", ") if ": " in rule else []
    checks = [
        {k: None for k in EVIDENCE_SCHEMA}
        | {"check": "rate" if m.endswith("_rate") else "latency", "metric": m, "outcome": verdict, "rule": "r"}
        | ({"p_value": 1e-6} if m.endswith("_rate") else {})
        for m in named
    ]
    return pl.DataFrame([*checks, row | sizes], schema=EVIDENCE_SCHEMA)


def _pool_verdicts_page() -> None:
    from inferensics.dashboard.views.canary import pool_verdicts
    from tests.dashboard.test_canary_pools import _verdict_frame  # AppTest runs this function's source alone

    pool_verdicts({
        "cpu-b": _verdict_frame("inconclusive", "undecided: p99_ms", 3729, 418),
        "cpu-c": _verdict_frame("fail", "failed: p50_ms, error_rate", 3500, 416),
        "cpu-d": _verdict_frame("pass", "every check passed", 900, 120),
    })  # fmt: skip


def test_the_page_headlines_the_worst_pool_and_shows_every_pools_verdict() -> None:
    """Walk 42 (D1 addendum): the page showed one pool's verdict, and which pool turned on two requests."""
    at = AppTest.from_function(_pool_verdicts_page, default_timeout=TIMEOUT_S).run()
    assert not at.exception, at.exception
    holm = "; p Holm–Bonferroni-adjusted for the 3 hardware pools judged"
    assert [e.value for e in at.error] == [
        f"**Verdict: FAIL** — on hardware pool cpu-c (failed: p50_ms, error_rate{holm})"
    ]
    (table,) = at.dataframe
    shown = pl.from_pandas(table.value)
    assert shown.rows() == [
        ("cpu-b", "INCONCLUSIVE", f"undecided: p99_ms{holm}", 3729, 418),
        ("cpu-c", "FAIL", f"failed: p50_ms, error_rate{holm}", 3500, 416),
        ("cpu-d", "PASS", f"every check passed{holm}", 900, 120),
    ]


def test_named_bundle_ids_are_shown_whole_and_digests_shortened() -> None:
    """Walk 42 (D11): the pickers cut ids to 12 characters, so ``bnd-llama-70b-canary`` and ``bnd-llama-70b-prod``
    both read ``bnd-llama-70``."""
    digest = "ab" * 32
    bundles = pl.DataFrame({
        col.BUNDLE_ID: ["bnd-llama-70b-canary", "bnd-llama-70b-prod", digest],
        col.BUNDLE_NAME: ["llama-70b-canary", "llama-70b-prod", "built"],
    })  # fmt: skip
    assert bundle_label(bundles) == {
        "bnd-llama-70b-canary": "llama-70b-canary (bnd-llama-70b-canary)",
        "bnd-llama-70b-prod": "llama-70b-prod (bnd-llama-70b-prod)",
        digest: f"built ({digest[:12]})",
    }


def test_all_pools_is_a_choice_and_a_split_without_a_shared_pool_is_a_warning() -> None:
    split = PoolSplit(baseline={"cpu-a": 201, "cpu-b": 100}, candidate={"cpu-b": 100})
    pools, note = like_for_like(ALL, split)
    assert pools == [None]
    assert note is not None
    assert note[0] == "warning"
    assert note[1].startswith("**All pools, mixed:** cpu-a (only the baseline served there: 201 requests);")
    assert note[1].endswith(f"*{SHARED}* compares cpu-b alone.")
    apart = PoolSplit(baseline={"cpu-a": 5}, candidate={"cpu-b": 7})
    for choice in (SHARED, ALL):
        pools, note = like_for_like(choice, apart)
        assert pools == [None]
        assert note is not None
        assert note[0] == "warning"
        assert "served no hardware pool in common" in note[1]
        assert "baseline: cpu-a (5); candidate: cpu-b (7) requests" in note[1]
    assert like_for_like(SHARED, PoolSplit({}, {"cpu-b": 3})) == ([None], None)  # a side without requests
    same = PoolSplit(baseline={"cpu-b": 3}, candidate={"cpu-b": 4})
    assert like_for_like(ALL, same) == ([None], None)  # every pool is shared: nothing to warn of


@dataclass(frozen=True)
class Walk:
    """The running service over :mod:`tests.dashboard.canary_pools` and what was seeded."""

    service: RunningService
    facts: PoolFacts

    @property
    def end(self) -> str:
        """The links' ``?end=``: the minute after the seed's clock."""
        return range_end(self.facts.now)


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    root = tmp_path_factory.mktemp("canary-pools-service")
    with seeded_service(root, "tests.dashboard.canary_pools", build) as (service, facts):
        yield Walk(service, facts)


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the dashboard is told the builders' keys are (replay reads them; the page only names them)."""
    return tmp_path_factory.mktemp("builder") / "builder-key.pub"


@pytest.fixture(scope="module")
def dashboard(walk: Walk, keyring: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard process over the walk's service, with the builders' keys in its environment; its URL."""
    root = tmp_path_factory.mktemp("canary-pools-dashboard")
    with running_dashboard(walk.service.url, READ, root, {KEYRING_ENV: str(keyring)}) as url:
        yield url


@pytest.mark.slow
@pytest.mark.browser
def test_the_canary_page_compares_the_pool_both_bundles_served(
    dashboard: str, walk: Walk, page: Page, tmp_path: Path
) -> None:
    """On main: pool All, 301 baseline requests against 100, and FAIL on p50 (the faster pool's 10 ms against
    the candidate's 20 ms), though on the pool both served the two bundles are alike."""
    page.goto(f"{dashboard}/canary?end={walk.end}")
    settle(page, charts=2)
    verdict = page.locator('[data-testid="stAlert"]').filter(has_text="Verdict:")
    expect(verdict).to_contain_text("Verdict: PASS — every check passed", timeout=PAGE_TIMEOUT_MS)
    assert shown_metric(page, "Baseline requests") == f"{walk.facts.served(BASELINE, SHARED_POOL):,}"
    assert shown_metric(page, "Candidate requests") == f"{walk.facts.served(CANDIDATE, SHARED_POOL):,}"
    note = page.locator('[data-testid="stAlert"]').filter(has_text="Left out:")
    expect(note).to_contain_text(f"Hardware pool {SHARED_POOL}, where both bundles served in this window")
    only_a = walk.facts.served(BASELINE, BASELINE_ONLY_POOL)
    expect(note).to_contain_text(
        f"Left out: {BASELINE_ONLY_POOL} (only the baseline served there: {only_a:,} requests)"
    )
    expect(page.get_by_role("combobox", name="Hardware pool")).to_have_value(SHARED)
    expect(page.locator('[data-testid="stCaptionContainer"]').filter(has_text=f"· pool {SHARED_POOL}")).to_have_count(1)
    screenshot(page, tmp_path, "canary-pool-both-served")


@pytest.mark.slow
def test_all_pools_still_compares_every_pool_and_says_they_are_mixed(walk: Walk) -> None:
    at = AppTest.from_file(str(APP_FILE), default_timeout=TIMEOUT_S)
    at.session_state[URL_STATE_KEY] = walk.service.url
    at.session_state[TOKEN_STATE_KEY] = READ
    at.session_state[NOW_KEY] = walk.facts.now + timedelta(minutes=1)
    at.run()
    at.switch_page("views/canary.py").run()
    assert at.selectbox(key="canary.hw_pool").value == SHARED
    at.selectbox(key="canary.hw_pool").select(ALL)
    at.button[0].click().run()  # the form's Compare button
    assert_clean(at)
    assert metric(at, "Baseline requests") == f"{walk.facts.served(BASELINE):,}"
    assert at.error[0].value == "**Verdict: FAIL** — failed: p50_ms"
    (mixed,) = [str(w.value) for w in at.warning if "All pools, mixed" in str(w.value)]
    assert f"{BASELINE_ONLY_POOL} (only the baseline served there: " in mixed
    assert f"*{SHARED}* compares {SHARED_POOL} alone." in mixed

    # Too few requests for the asked minimum: the page says how a short run gets a verdict (walk 39 met
    # INCONCLUSIVE beside the demo's printed FAIL, which its lowered thresholds gave).
    at.selectbox(key="canary.hw_pool").select(SHARED)
    at.number_input(key="canary.min_requests").set_value(150)
    at.button[0].click().run()
    assert_clean(at)
    assert at.warning[-1].value == "**Verdict: INCONCLUSIVE** — fewer than 150 requests on a side"
    shared = walk.facts.served(CANDIDATE, SHARED_POOL)
    (hint,) = [str(c.value) for c in at.caption if "*Min requests per side*" in str(c.value)]
    assert hint.startswith(f"A side served {shared:,} requests here, fewer than the 150 *Min requests per side* asks.")
    assert "`inferensics canary compare --min-requests`" in hint


@pytest.mark.slow
@pytest.mark.browser
def test_the_request_page_gives_a_replay_command_that_runs_as_shown(
    dashboard: str, walk: Walk, keyring: Path, page: Page, tmp_path: Path
) -> None:
    """On main: "Name the fault: `inferensics replay req-...`", which stops at once without a keyring."""
    page.goto(f"{dashboard}/request?request_id={FAILED_ID}&end={walk.end}")
    settle(page)
    expect(page.get_by_text("Not replayed yet.")).to_be_visible()
    code = page.locator('[data-testid="stCode"] code').filter(has_text="inferensics replay").inner_text().strip()
    # Its bundle was never pushed: replay cannot pull it, so the command takes the bundle's folder (session 45).
    assert code == (
        f"inferensics replay {FAILED_ID} --service {walk.service.url} --keyring {keyring} --token TOKEN --bundle DIR"
    )
    params = replay_params(code)
    assert (params["service"], params["keyring"]) == (walk.service.url, str(keyring))
    # The dashboard reads with a token, never shown: what to put in its place is.
    fill_in = page.locator('[data-testid="stCaptionContainer"]').filter(has_text="Fill in TOKEN: a token of this")
    expect(fill_in).to_have_count(1)
    assert "DIR: the folder of bundle " in fill_in.inner_text()
    assert READ not in code + fill_in.inner_text()
    screenshot(page, tmp_path, "request-replay-command")


def _corrected_pools_page() -> None:
    import streamlit as st

    from inferensics.dashboard.views.canary import pool_verdicts

    pool_verdicts(st.session_state["frames"])


def test_the_page_and_the_cli_give_the_same_pool_verdicts_on_one_store(chdb_dir: Path) -> None:
    """The CLI corrects each pool's p-value checks for the pools judged (Holm–Bonferroni); the page judged each pool
    uncorrected, so ten pools with chance-sized increases in errors failed on the page and passed in the CLI."""
    from inferensics.analytics.canary_pools import correct_for_pools
    from inferensics.analytics.report.canary import verdict_of
    from tests.analytics.canary_requests import insert_requests
    from tests.analytics.test_canary_pools import BASELINE_ERRORS, MILD, T, _judged, _side
    from tests.seeding import scratch_store

    with scratch_store(chdb_dir, "page_pools") as store:  # the CLI test's ten pools (tests/analytics)
        sides = []
        for i, (pool, errors) in enumerate(MILD.items()):
            start = T + timedelta(hours=i)
            sides += [_side("base", pool, BASELINE_ERRORS, start), _side("cand", pool, errors, start)]
        insert_requests(store, *sides)
        frames = _judged(store, list(MILD))
    cli = {pool: verdict_of(frame) for pool, frame in correct_for_pools(frames).items()}  # cli/report_commands.py
    assert {v for v, _ in cli.values()} == {"pass"}
    at = AppTest.from_function(_corrected_pools_page, default_timeout=TIMEOUT_S)
    at.session_state["frames"] = frames
    at.run()
    assert not at.exception, at.exception
    (table,) = at.dataframe
    page = {pool: (verdict.lower(), rule) for pool, verdict, rule, *_ in pl.from_pandas(table.value).rows()}
    assert page == cli
    assert not at.error
    assert [s.value for s in at.success] == ["**Verdict: PASS** — on hardware pools " + "; ".join(
        f"{pool} ({rule})" for pool, (_, rule) in cli.items()
    )]  # fmt: skip
