"""``store_up`` and ``/readyz`` follow the store while the collector has nothing to write.

They changed only when the writer next tried to write: with no traffic a collector kept reporting the store up
after it went down, and down after it came back. The writer now probes the store while idle (``SELECT 1`` on its
own thread and connection). The outage here is the service's fault control (``store_down``, which fails the
probe as it fails an insert) and a real server DSN with nothing listening.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState, build_state, create_app, load_config
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import Store
from tests.collector.service.harness import ADMIN, TOKENS, free_port
from tests.polling import poll

FAST_PROBE_S = 0.05
"""The probe interval these tests give the writer (the service's is PROBE_EVERY_S)."""
STORE_UP = "inferensics_collector_store_up"


def _admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def _store_up(api: TestClient) -> float:
    for line in api.get("/metrics", headers=_admin()).text.splitlines():
        if line.startswith(f"{STORE_UP} "):
            return float(line.split()[1])
    raise AssertionError(f"{STORE_UP} is not in /metrics")


def _drop(dsn: str) -> None:
    store = Store.open(dsn)
    try:
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
    finally:
        store.close()


@pytest.fixture
def faulty(store_dsn: str, tmp_path: Path) -> Iterator[tuple[ServiceState, TestClient]]:
    """A running service in this process with the fault control on, probing every :data:`FAST_PROBE_S`."""
    config = load_config(
        {"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "tokens": TOKENS, "fault_control": True},
        environ={},
    )
    state = build_state(config, open_store=lambda: Store.open(store_dsn))
    state.writer.probe_every_s = FAST_PROBE_S
    try:
        with TestClient(create_app(state)) as api:
            yield state, api
    finally:
        state.close()
        _drop(store_dsn)


def test_an_outage_with_nothing_to_write_turns_store_up_and_readyz_both_ways(
    faulty: tuple[ServiceState, TestClient],
) -> None:
    state, api = faulty
    assert api.get("/readyz").status_code == 200
    assert _store_up(api) == 1
    assert api.post("/api/v1/_faults", json={"store_down": True}, headers=_admin()).status_code == 200
    # Nothing is sent: only the probe can see the outage.
    down = poll(lambda: api.get("/readyz"), lambda r: r.status_code == 503, timeout=60)
    assert down.status_code == 503, down.text
    assert "fault injected" in down.json()["last_error"]
    assert _store_up(api) == 0
    assert state.spool.files() == 0, "the writer had something to write: this is not the idle case"
    assert api.post("/api/v1/_faults", json={"store_down": False}, headers=_admin()).status_code == 200
    up = poll(lambda: api.get("/readyz"), lambda r: r.status_code == 200, timeout=60)
    assert up.status_code == 200, up.text
    assert up.json() == {"ready": True, "store_ok": True, "last_error": ""}
    assert _store_up(api) == 1
    # the probe is no insert: it counts no failed insert, and writes nothing
    assert state.metrics.get("store_errors") == 0
    assert state.metrics.get("written_rows") == 0


def test_a_store_down_at_start_is_seen_back_with_nothing_to_write(store_dsn: str, tmp_path: Path) -> None:
    """The store is a ClickHouse server DSN with nothing listening until the test "brings it up" (the opener then
    opens the test's embedded store): the writer opens and migrates it with no span sent and no query asked."""
    unreachable = f"http://default@127.0.0.1:{free_port()}/inferensics"
    target = {"dsn": unreachable}
    config = load_config({"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "tokens": TOKENS}, environ={})
    state = build_state(config, open_store=lambda: Store.open(target["dsn"]))
    state.writer.probe_every_s = FAST_PROBE_S
    try:
        with TestClient(create_app(state)) as api:
            down = api.get("/readyz")
            assert down.status_code == 503
            assert "cannot open store" in down.json()["last_error"]
            assert _store_up(api) == 0
            # the probe retried the open while the server was down (each failed open is counted)
            opens = poll(lambda: state.metrics.get("store_errors"), lambda n: n >= 3, timeout=60)
            assert opens >= 3
            assert api.get("/readyz").status_code == 503
            target["dsn"] = store_dsn
            up = poll(lambda: api.get("/readyz"), lambda r: r.status_code == 200, timeout=60)
            assert up.status_code == 200, up.text
            assert _store_up(api) == 1
            assert state.writer.store is not None
            assert state.writer.store.schema_version() == LATEST_VERSION
            assert state.spool.files() == 0
    finally:
        state.close()
        _drop(store_dsn)


def test_the_probe_answers_and_says_why_the_store_is_down(store_dsn: str, tmp_path: Path) -> None:
    """Called directly (the writer thread not started): the answer, ``store_ok`` and the reason follow the store."""
    config = load_config({"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "tokens": TOKENS}, environ={})
    state = build_state(config, open_store=lambda: Store.open(store_dsn), start_writer=False)
    writer = state.writer
    try:
        assert (writer.probe(), writer.store_ok, writer.last_error) == (True, True, "")  # opened and migrated
        state.faults.store_down = True
        assert (writer.probe(), writer.store_ok) == (False, False)
        assert writer.last_error.startswith("the store does not answer: store unavailable (fault injected")
        state.faults.store_down = False
        assert (writer.probe(), writer.store_ok, writer.last_error) == (True, True, "")
    finally:
        state.close()
        _drop(store_dsn)


def test_the_metric_help_no_longer_says_it_goes_stale(faulty: tuple[ServiceState, TestClient]) -> None:
    _, api = faulty
    text = api.get("/metrics", headers=_admin()).text
    (help_line,) = [ln for ln in text.splitlines() if ln.startswith(f"# HELP {STORE_UP} ")]
    assert "probe" in help_line
    assert "keeps its value" not in help_line
