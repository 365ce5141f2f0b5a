"""``report weekly`` says which requests a bundle served at sizes it was never qualified at (per model and bundle, the
most common sizes) and how to qualify them: the host SDK recorded it on each request, and the report never said."""

from __future__ import annotations

import doctest
from datetime import timedelta

import pytest

from inferensics.analytics import LocalRunner, registry
from inferensics.analytics.bundle_unqualified import bundle_unqualified_sizes
from inferensics.analytics.filters import SliceParams
from inferensics.analytics.report import unqualified
from inferensics.analytics.report.weekly import render_weekly_markdown, summary_lines
from inferensics.analytics.weekly import UNQUALIFIED_QUERY, build_weekly_report
from inferensics.schema.store import Store
from tests.analytics.test_bundle_unqualified import B1, B3, NOW, decoder_requests, unqualified_requests
from tests.seeding import seed


@pytest.fixture
def runner(store: Store, monkeypatch: pytest.MonkeyPatch) -> LocalRunner:
    # The named query, as the registry names it once it lists it (analytics/registry.py is not this change's file).
    named = registry.NAMED_QUERIES.get(UNQUALIFIED_QUERY) or registry._q(
        UNQUALIFIED_QUERY, SliceParams, bundle_unqualified_sizes, registry._ALL
    )
    monkeypatch.setitem(registry.NAMED_QUERIES, UNQUALIFIED_QUERY, named)
    seed(store, events=unqualified_requests())
    return LocalRunner(store)


def test_the_weekly_summary_names_the_unqualified_sizes_and_the_rebuild_command(runner: LocalRunner) -> None:
    report = build_weekly_report(runner, "2026-W10", now=NOW + timedelta(days=2))
    (line,) = [x for x in summary_lines(report) if "not qualified" in x]
    assert line.startswith(
        "Requests served at sizes their bundle was not qualified at (accuracy and latency unchecked there): 6 of 10 "
        f"requests of llama on bundle {B1[:12]} (most common: [9,8] in 5, [7,8] in 3, [3,8] in 1). Rebuild the bundle "
        "with those shapes: `inferensics bundle build --model <factory> --key <key> --out <dir> --shapes-from-service "
        "<service URL> --traffic-model llama`"
    )
    markdown = render_weekly_markdown(report)
    assert "## Bundle hits at unqualified sizes" in markdown
    assert f"| llama | {B1[:12]} | 6 | 10 | 12 |" in markdown


def test_a_week_without_unqualified_sizes_says_nothing_of_them(runner: LocalRunner) -> None:
    report = build_weekly_report(runner, "2026-W09", now=NOW + timedelta(days=2))
    assert report.bundle_unqualified.is_empty()
    assert not [x for x in summary_lines(report) if "not qualified" in x]
    assert "unqualified sizes" not in render_weekly_markdown(report)


def test_the_rebuild_command_example_stays_true() -> None:
    result = doctest.testmod(unqualified, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert (result.attempted, result.failed) == (1, 0)


def test_each_calls_graph_sizes_read_apart_in_the_summary_and_the_table(runner: LocalRunner, store: Store) -> None:
    """A graph with several inputs with a symbol reads as a tuple of one list per input, as ``bundle verify``'s
    ``qualified:`` line writes it: the report ran each input's list into the next call's
    (``[8,128], [8,1];[2,8,4,128,16];…``)."""
    seed(store, events=decoder_requests())
    report = build_weekly_report(runner, "2026-W10", now=NOW + timedelta(days=2))
    (line,) = [x for x in summary_lines(report) if "not qualified" in x]
    assert (
        f"3 of 3 requests of decoder on bundle {B3[:12]} (most common: ([8,1], [2,8,4,128,16]) in 3, "
        "[8,128] in 1, ([8,1], [2,8,4,192,16]) in 1)"
    ) in line
    markdown = render_weekly_markdown(report)
    sizes = "([8,1], [2,8,4,128,16]), [8,128], ([8,1], [2,8,4,192,16])"
    assert f"| decoder | {B3[:12]} | 3 | 3 | 9 | {sizes} | 3, 1, 1 |" in markdown, markdown
