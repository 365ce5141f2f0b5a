"""A recorded replay verdict names the request it replayed (``request_host``, ``request_ts``), so the request page of
one of several requests that share an id shows it only on its own occurrence, also where their captured inputs are
the same bytes; through a real service (``inferensics serve`` over an embedded store) and the real ``replay`` command
(its fresh executor replaced: what is recorded, not what is replayed, is under test).

What it got wrong: a verdict carried the request id and the replaying machine's host only, and the page told the
verdicts of a shared id apart by the digest of the inputs they replayed: a client re-run that sent the same inputs
twice showed one replay's verdict on both requests' pages.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from typer.testing import CliRunner

from inferensics.analytics.drilldown import SAME_REQUEST
from inferensics.cli import replay_commands
from inferensics.cli.app import app
from inferensics.collector.service.row_plan import ColumnBuffer, fast_row, plan_for
from inferensics.replay import Verdict
from inferensics.schema import columns as col
from inferensics.schema.events import NO_TS, ReplayResultEvent, RequestEvent
from tests.collector.service.harness import ADMIN, RunningService
from tests.replay.served import put_inputs, running_service, seed_requests

runner = CliRunner()
pytestmark = pytest.mark.slow
RID = "twin-1"
T0 = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)  # within the requests' 30 days
FIRST, SECOND = ("h1", T0 + timedelta(minutes=1, microseconds=250)), ("h2", T0 + timedelta(minutes=25))
"""Host and start time of each request of the shared id (the first's start has microseconds: they are kept)."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningService, str]]:
    """Two requests of id ``twin-1`` (h1, then h2 24 minutes later) whose captured inputs are the same bytes; the
    service and that digest."""
    with running_service(tmp_path_factory.mktemp("svc")) as svc:
        inputs = put_inputs(svc, x=torch.ones(4, 8))
        where = {
            "model": "m",
            "hw_pool": "cpu",
            "traffic_class": "batch",
            "status": "error",
            "error": "nan",
            "bundle_id": "b" * 64,
        }  # served from a bundle: replay refuses a request served without one
        seed_requests(svc, [RequestEvent(request_id=RID, ts=ts, host=host, capture_blob=inputs, **where)
                            for host, ts in (FIRST, SECOND)])  # fmt: skip
        yield svc, inputs


def test_a_verdict_names_its_request_and_shows_on_that_occurrence_only(
    service: tuple[RunningService, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, inputs = service

    def fresh(pack: Path, **kwargs: Any) -> dict[str, Any]:  # the verdict of the inputs both requests sent
        evidence = {"request_id": RID, "captured_inputs": {"sha256": inputs}}
        return Verdict(category="none", summary="no fault reproduced", evidence=evidence).to_dict()

    monkeypatch.setattr(replay_commands, "_run_fresh", fresh)
    keyring = tmp_path / "keys.pub"
    keyring.write_text("")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    res = runner.invoke(app, ["replay", RID, "--service", svc.url, "--token", ADMIN, "--occurrence", "2", "--bundle",
                              str(bundle), "--keyring", str(keyring)], env={"COLUMNS": "400"})  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "recorded in replay_results" in res.output, res.output
    client = svc.client(ADMIN)
    stored = f"SELECT {col.REQUEST_HOST}, {col.REQUEST_TS}, {col.HOST} FROM replay_results WHERE request_id = '{RID}'"
    deadline = time.monotonic() + 30
    while not (rows := client.sql(stored)).height:
        assert time.monotonic() < deadline, f"the verdict never reached the store:\n{svc.log.read_text()[-3000:]}"
        time.sleep(0.3)
    assert rows.height == 1
    assert (rows.item(0, col.REQUEST_HOST), rows.item(0, col.REQUEST_TS)) == SECOND
    assert rows.item(0, col.HOST) not in ("", SECOND[0])  # the machine the replay ran on
    # The request page: the verdict on the second request's page only, although the first sent the same inputs.
    assert client.query("request_replays", request_id=RID, occurrence=1).height == 0
    second = client.query("request_replays", request_id=RID, occurrence=2)
    assert second.get_column("attribution").to_list() == ["none"]
    assert second.get_column(SAME_REQUEST).to_list() == [True]
    assert col.REQUEST_HOST not in second.columns  # read to tell the requests apart, not shown


def test_a_verdict_sent_without_its_request_is_stored_with_the_defaults() -> None:
    """A verdict from an ``inferensics replay`` older than the columns (no ``request_*`` attributes) takes the
    service's fast path with the model's defaults: '' and the epoch (the epoch was a datetime among microseconds)."""
    plan = plan_for(ReplayResultEvent)
    attributes = [KeyValue(key=f"inferensics.{k}", value=AnyValue(string_value=v))
                  for k, v in ((col.REPLAY_ID, "r1"), (col.REQUEST_ID, RID))]  # fmt: skip
    row = fast_row(plan, attributes, 1_700_000_000_000_000, None, "replayer")
    assert row is not None
    buffer = ColumnBuffer(plan)
    buffer.append(row[0])
    (stored,) = buffer.to_arrow().to_pylist()
    assert (stored[col.REQUEST_HOST], stored[col.REQUEST_TS]) == ("", NO_TS)
    assert stored[col.HOST] == "replayer"
