"""The request page of an id that two requests share says so, shows one, and lets the reader pick the other;
the reasons shown are the shown request's own, never both requests' merged. A request whose compile failed is
said to have raised, not to have run eagerly (the overview's eager fallback rate leaves it out)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.collector.service.harness import READ, new_service
from tests.dashboard.apptest import assert_clean, open_page, texts
from tests.dashboard.conftest import SeededService, seed_store
from tests.dashboard.reused_ids import (
    FIRST_REASON,
    INPUTS,
    RAISED_ID,
    RERUN_REASON,
    REUSED_ID,
    UNTIED,
    VERDICTS,
    starts,
)
from tests.dashboard.seed import SeedFacts

PAGE = "views/request.py"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reused(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    root: Path = tmp_path_factory.mktemp("reused-ids-service")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    service = new_service(root)
    seed_store(service.dsn, now, "tests.dashboard.reused_ids")
    service.start()
    try:
        yield SeededService(service=service, token=READ, facts=SeedFacts(now=now, requests=[], others=[]))
    finally:
        service.stop()


def test_two_requests_sharing_an_id_are_shown_apart(reused: SeededService) -> None:
    first, rerun = starts(reused.facts.now)
    at = open_page(reused, PAGE, **{"drill.request_id": REUSED_ID})
    assert_clean(at)
    shown = texts(at)
    assert f"2 requests share the id `{REUSED_ID}`" in shown, shown
    assert f"Showing request 1 of 2, started {first:%Y-%m-%d %H:%M:%S} UTC" in shown, shown
    assert FIRST_REASON in shown, shown
    assert RERUN_REASON not in shown, shown

    at.selectbox(key="drill.occurrence_pick").select(f"2 of 2 · started {rerun:%Y-%m-%d %H:%M:%S} UTC").run()
    assert_clean(at)
    shown = texts(at)
    assert f"Showing request 2 of 2, started {rerun:%Y-%m-%d %H:%M:%S} UTC" in shown, shown
    assert RERUN_REASON in shown, shown
    assert FIRST_REASON not in shown, shown


def test_each_request_of_a_shared_id_shows_the_replay_verdicts_of_its_own_inputs(reused: SeededService) -> None:
    """A verdict names its request by id only: every request of the id listed every verdict (the newest, the
    re-run's, on the first request's page). Tied by the digest of the inputs it replayed, each shows its own; one
    that names no digest is counted and said to be of either."""
    at = open_page(reused, PAGE, **{"drill.request_id": REUSED_ID})
    assert_clean(at)
    for k, (own, other) in enumerate(((0, 1), (1, 0))):
        if k:
            _, rerun = starts(reused.facts.now)
            pick = f"2 of 2 · started {rerun:%Y-%m-%d %H:%M:%S} UTC"
            at.selectbox(key="drill.occurrence_pick").select(pick).run()
            assert_clean(at)
        shown = texts(at)
        assert f"**Replay verdict: {VERDICTS[own]}**" in shown, shown
        assert "(2 replays)" in shown, shown
        assert f"Replay verdict: {VERDICTS[other]}" not in shown, shown
        assert f"replayed this request's inputs (sha256 `{INPUTS[own][:12]}…`)" in shown, shown
        assert "1 of them names no inputs digest and may be another request's of the id" in shown, shown
    assert UNTIED not in shown, shown  # the newest verdict is shown; the untied one is older


def test_a_request_whose_compile_failed_is_said_to_have_raised(reused: SeededService) -> None:
    at = open_page(reused, PAGE, **{"drill.request_id": RAISED_ID})
    assert_clean(at)
    shown = texts(at)
    assert "**The compile failed and the request raised** (`compile_error`): it did not run eagerly" in shown, shown
    assert "Ran eagerly" not in shown, shown
