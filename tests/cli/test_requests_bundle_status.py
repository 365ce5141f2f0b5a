"""``requests --id`` says what the request's bundle did: ran from the verified bundle, a bundle miss (each miss's
action, differing factors and why), or a shape the bundle never qualified; it showed only the bundle's id."""

from __future__ import annotations

from datetime import UTC, datetime

from typer.testing import CliRunner

from inferensics.analytics.drilldown import FACTOR_SHOWN
from inferensics.cli.app import app
from inferensics.schema.store import Store
from tests.dashboard.bundle_statuses import (
    BUNDLE_NAME,
    HIT,
    LATER,
    LONG_FACTOR,
    MISS,
    MISS_FACTOR,
    MISS_REASON,
    REQUEST_SHAPE,
    SHAPE,
    UNQUALIFIED_CALLS,
    UNQUALIFIED_SHOWN,
)
from tests.dashboard.bundle_statuses import events as bundle_events
from tests.seeding import seed

runner = CliRunner()
ENV = {"COLUMNS": "250"}


def _bundle_lines(dsn: str, rid: str) -> list[str]:
    res = runner.invoke(app, ["requests", "--id", rid, "--dsn", dsn], env=ENV)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith(f"request {rid}: "), res.output
    return [line for line in lines if line.startswith("bundle: ")]


def test_one_request_says_what_its_bundle_did(store: Store) -> None:
    seed(store, events=bundle_events(datetime.now(UTC).replace(second=0, microsecond=0)))
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    assert _bundle_lines(dsn, HIT) == [
        f"bundle: ran from bundle {BUNDLE_NAME}, verified on its host: every graph that served it came from the bundle"
    ]
    shape = _bundle_lines(dsn, SHAPE)
    assert len(shape) == 2
    assert shape[1].startswith(
        f"bundle: a graph of bundle {BUNDLE_NAME} served {UNQUALIFIED_CALLS} of its calls at graph sizes "
        f"{UNQUALIFIED_SHOWN} (request {REQUEST_SHAPE}), which the bundle never qualified that graph at (its"
    )
    assert _bundle_lines(dsn, MISS) == [
        f"bundle: bundle miss: a graph that served it is not in bundle {BUNDLE_NAME} (verified on its host): compiled "
        f"({MISS_FACTOR}; {LONG_FACTOR[:FACTOR_SHOWN]}… ({len(LONG_FACTOR) - FACTOR_SHOWN:,} more)): {MISS_REASON}"
    ]
    assert _bundle_lines(dsn, LATER)[0].endswith("(in an earlier request's compile on its host)")
