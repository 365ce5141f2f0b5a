"""The argmax-agreement check names its disagreeing pairs (request ids on both sides and the input digest), the
worst first, from the query that counts the pairs: a FAIL on argmax agreement (42 pairs disagree) named no request,
and on-call found one by guessing (``/work/s44/oncall/report.md``, noticed 1).

The store: 40 inputs each served once by the baseline and once by the candidate on each of two pools, one a second.
On ``pool-a`` the candidate disagrees on 13 inputs (2, 5, 8, ...), with first argmax ids that differ in a known
number of positions (five pairs have none recorded, as rows older than the column), and serves input 2 a second
time later, agreeing (the pair is of the earliest request). ``pool-b`` agrees everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from inferensics.analytics import CanaryParams, canary_compare
from inferensics.analytics.canary import (
    ARGMAX_DIFFERING,
    BASELINE_REQUEST,
    CANDIDATE_REPLAYABLE,
    CANDIDATE_REQUEST,
    DISAGREEMENT_SCHEMA,
    DISAGREEMENTS_KEPT,
    canary_compare_pools,
    disagreements_of,
)
from inferensics.analytics.canary_pools import CanaryPoolsParams, canary_compare_pools_frame, pool_frames
from inferensics.schema import columns as col
from inferensics.schema.events import FP_OK
from inferensics.schema.store import Store
from tests.analytics.canary_requests import insert_requests, request_frame
from tests.analytics.counting_store import CountingStore
from tests.seeding import scratch_store

T = datetime(2026, 3, 2, tzinfo=UTC)
INPUTS = 40
HEAD = list(range(16))
POOLS = ["pool-a", "pool-b"]
DAY = dict(model="m", baseline="base", candidate="cand", start=T, end=T + timedelta(days=1), min_requests=10)


def _headless(i: int) -> bool:
    """Whether input ``i``'s requests recorded no first argmax ids."""
    return i % 9 == 2


def _differing(i: int) -> int:
    """How many of the candidate's first argmax ids differ on disagreeing input ``i`` (0: none recorded)."""
    return 0 if _headless(i) else (i * 5) % 16 + 1


def _candidate_head(i: int) -> list[int]:
    k = _differing(i)
    return [] if k == 0 else [x + 100 if j < k else x for j, x in enumerate(HEAD)]


DISAGREEING = [i for i in range(INPUTS) if i % 3 == 2]
CAPTURED = 8
"""The disagreeing input whose candidate request's inputs were captured (from a bundle: replay can take it)."""


def _requests(pool: str) -> list[pl.DataFrame]:
    n = INPUTS
    ids = [f"in-{i:02d}" if pool == "pool-a" else f"in-b-{i:02d}" for i in range(n)]  # inputs of its own
    wrong = set(DISAGREEING) if pool == "pool-a" else set()
    base = request_frame("base", n, T, {
        col.INPUT_DIGEST: ids, col.FP_ARGMAX_DIGEST: [f"a-{d}" for d in ids], col.FP_STATUS: FP_OK,
        col.FP_ARGMAX_HEAD: [[] if _headless(i) else HEAD for i in range(n)],
    }, pool=pool)  # fmt: skip
    cand = request_frame("cand", n, T + timedelta(seconds=1), {
        col.INPUT_DIGEST: ids, col.FP_STATUS: FP_OK,
        col.FP_ARGMAX_DIGEST: [f"x-{d}" if i in wrong else f"a-{d}" for i, d in enumerate(ids)],
        col.FP_ARGMAX_HEAD: [_candidate_head(i) if i in wrong else HEAD for i in range(n)],
        col.CAPTURE_BLOB: ["ab" * 32 if i == CAPTURED else "" for i in range(n)],
    }, pool=pool)  # fmt: skip
    # Input 2 again, later and agreeing: the pair is of the earliest candidate request, which disagrees.
    again = request_frame("cand-again", 1, T + timedelta(hours=1), {
        col.BUNDLE_ID: "cand", col.INPUT_DIGEST: ids[2], col.FP_STATUS: FP_OK, col.FP_ARGMAX_DIGEST: f"a-{ids[2]}",
        col.FP_ARGMAX_HEAD: [HEAD],
    }, pool=pool)  # fmt: skip
    return [base, cand, again]


@pytest.fixture(scope="module")
def store(chdb_dir: Path) -> Iterator[Store]:
    with scratch_store(chdb_dir, "canary_disagree") as store:
        insert_requests(store, *(f for pool in POOLS for f in _requests(pool)))
        yield store


def _expected() -> pl.DataFrame:
    """pool-a's worst pairs as the rule orders them: most argmax ids differing, then the earliest candidate."""
    ranked = sorted(DISAGREEING, key=lambda i: (-_differing(i), i))[:DISAGREEMENTS_KEPT]
    return pl.DataFrame(
        {
            BASELINE_REQUEST: [f"base-pool-a-{i}" for i in ranked],
            CANDIDATE_REQUEST: [f"cand-pool-a-{i}" for i in ranked],
            col.INPUT_DIGEST: [f"in-{i:02d}" for i in ranked],
            ARGMAX_DIFFERING: [_differing(i) for i in ranked],
            CANDIDATE_REPLAYABLE: [i == CAPTURED for i in ranked],
        },
        schema=DISAGREEMENT_SCHEMA,
    )


def test_the_failing_agreement_names_its_worst_disagreeing_pairs_from_the_pairs_query(store: Store) -> None:
    counting = CountingStore(store)
    # Compared the day after (a window past the raw requests kept would add the rollups' count of each side).
    result = canary_compare(counting, CanaryParams(**DAY, hw_pool="pool-a"), now=T + timedelta(days=1))
    agreement = result.evidence.filter(pl.col("metric") == "argmax_agreement").row(0, named=True)
    assert (agreement["baseline"], agreement["candidate"], agreement["outcome"]) == (40.0, 27 / 40, "fail")
    assert_frame_equal(result.disagreements, _expected())
    # The worst by argmax ids first; the pairs without them last, by time, input 2's later agreeing request no pair;
    # past the kept ten, inputs 20, 29 and 38 are left out.
    assert result.disagreements.get_column(ARGMAX_DIFFERING).to_list() == [16, 10, 9, 7, 6, 4, 3, 1, 0, 0]
    assert result.disagreements.tail(2).get_column(col.INPUT_DIGEST).to_list() == ["in-02", "in-11"]
    assert counting.queries == 3  # the filter check, the sides, the pairs: no query added for the ids


def test_only_the_worst_are_kept_and_a_truncated_side_names_them_too(store: Store) -> None:
    """Past :data:`DISAGREEMENTS_KEPT` the worst are kept; a side read again at ``max_rows`` (its join) gives the
    same pairs from its earliest requests."""
    whole = canary_compare(store, CanaryParams(**DAY, hw_pool="pool-a"))
    truncated = canary_compare(store, CanaryParams(**DAY, hw_pool="pool-a", max_rows=INPUTS))
    assert truncated.truncated
    assert_frame_equal(truncated.disagreements, whole.disagreements)
    every = canary_compare(store, CanaryParams(**DAY))  # both pools at once: pool-b agrees, so the same pairs
    assert_frame_equal(every.disagreements, _expected())


def test_each_pool_gets_its_own_pairs_and_the_frame_carries_them(store: Store) -> None:
    grouped = canary_compare_pools(store, CanaryParams(**DAY), POOLS)
    assert_frame_equal(grouped["pool-a"].disagreements, _expected())
    assert grouped["pool-b"].disagreements.is_empty()
    assert grouped["pool-b"].evidence.filter(pl.col("metric") == "argmax_agreement").item(0, "outcome") == "pass"
    frames = pool_frames(canary_compare_pools_frame(store, CanaryPoolsParams(**DAY, hw_pools=POOLS)))
    assert_frame_equal(disagreements_of(frames["pool-a"]), _expected())
    assert disagreements_of(frames["pool-b"]).is_empty()
    # A frame without the column (recorded before it existed) has none.
    assert disagreements_of(frames["pool-a"].drop("disagreements")).is_empty()
