"""Release channels: ``bundle promote`` refuses a channel name no bundle was promoted on unless ``--new-channel``
(a typo made a channel of its own), every state event of a bundle carries one model label, and ``bundle pull
--channel NAME`` pulls the bundle promoted there now. Against a real embedded store and a real service."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.cli.app import app
from inferensics.schema.events import BundleEvent, BundleStateEvent
from inferensics.schema.store import Store
from tests.bundle.conftest import Keys, one_line_error
from tests.collector.service.harness import ADMIN, new_service

runner = CliRunner()

A, B = "ab" * 32, "cd" * 32


def _dsn(store: Store, *ids: str) -> str:
    store.insert_events([BundleEvent(ts=datetime.now(UTC), bundle_id=i, model="tiny", host="h") for i in ids])
    return f"chdb://{store.dsn.path}?database={store.database}"


def _ok(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return res.output.strip()


def _promotions(store: Store) -> list[tuple[str, str]]:
    rows = store.query_rows(
        f"SELECT bundle_id, channel FROM {store.database}.bundle_states WHERE state = 'promoted' ORDER BY ts"
    )
    return [(str(i), str(c)) for i, c in rows]


def test_a_channel_not_in_use_is_refused_unless_new_channel(store: Store) -> None:
    """``--channel prodution`` was taken: the bundle read "promoted on prodution" and production kept its old
    bundle. A name no bundle was promoted on is refused in one line naming the channels in use and the flag."""
    dsn = _dsn(store, A, B)
    first = one_line_error(["bundle", "promote", A[:8], "--channel", "eu-shadow", "--dsn", dsn], "--new-channel")
    assert "no channel is in use yet" in first
    # The usual names need no flag on a fresh store (a first `promote --channel production` is no typo).
    _ok(["bundle", "promote", A[:8], "--channel", "production", "--dsn", dsn])
    _ok(["bundle", "promote", A[:8], "--channel", "canary", "--new-channel", "--dsn", dsn])
    text = one_line_error(["bundle", "promote", B[:8], "--channel", "prodution", "--dsn", dsn], "'prodution'")
    assert "channels in use: canary, production" in text
    assert "pass --new-channel" in text
    assert _promotions(store) == [(A, "production"), (A, "canary")]  # nothing recorded for the typo
    out = _ok(["bundle", "promote", B[:8], "--channel", "production", "--dsn", dsn])  # in use: no flag needed
    assert out == f"promoted {B[:16]} on production (previous {A[:12]} kept for rollback)"


def test_state_events_carry_the_traffic_model_label(store: Store) -> None:
    """A bundle's push recorded the manifest's factory (``model:build``) as its model and every state event after
    it copied that label, so its promotions never met its traffic's (``llama``), the label the dashboard's
    release and canary views join on. A state event carries the label hosts registered the bundle with; before
    any has, the push's (``bundle push --model``), else none (eight bundles: the answers of both tables come in
    no fixed order)."""
    ids = [f"{i:02x}" * 32 for i in range(16, 24)]
    t0 = datetime.now(UTC) - timedelta(minutes=5)
    # pushed by a push that recorded the factory as the model
    store.insert_events([BundleStateEvent(ts=t0, bundle_id=i, state="pushed", model="model:build") for i in ids])
    store.insert_events([BundleEvent(ts=t0 + timedelta(minutes=1), bundle_id=i, model="llama", host="h")
                         for i in ids])  # fmt: skip
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    _ok(["bundle", "promote", ids[0][:8], "--channel", "canary", "--new-channel", "--dsn", dsn])
    for i in ids:
        _ok(["bundle", "promote", i[:8], "--channel", "canary", "--dsn", dsn])
    _ok(["bundle", "quarantine", ids[0][:8], "--dsn", dsn])
    rows = store.query_rows(f"SELECT state, model FROM {store.database}.bundle_states WHERE state != 'pushed'")
    assert len(rows) == 10
    assert {str(m) for _, m in rows} == {"llama"}, rows
    # No host yet: the label the push was given, and the same once a host registers it so.
    pushed = "9e" * 32
    store.insert_events([BundleStateEvent(ts=t0, bundle_id=pushed, state="pushed", model="qwen",
                                          attrs={"factory": "model:build"})])  # fmt: skip
    _ok(["bundle", "promote", pushed[:8], "--channel", "canary", "--dsn", dsn])
    store.insert_events([BundleEvent(ts=t0 + timedelta(minutes=1), bundle_id=pushed, model="qwen", host="h")])
    _ok(["bundle", "revoke", pushed[:8], "--dsn", dsn])
    rows = store.query_rows(f"SELECT model FROM {store.database}.bundle_states WHERE bundle_id = '{pushed}'")
    assert sorted(str(r[0]) for r in rows) == ["qwen"] * 3
    # A bundle no push named takes its host registration's label.
    dsn = _dsn(store, B)
    _ok(["bundle", "promote", B[:8], "--channel", "canary", "--dsn", dsn])
    rows = store.query_rows(f"SELECT model FROM {store.database}.bundle_states WHERE bundle_id = '{B}'")
    assert rows == [("tiny",)]


def test_pull_by_channel_needs_an_id_or_a_channel(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    one_line_error(["bundle", "pull", "--out", out, "--service", "http://127.0.0.1:9"], "pass a bundle id or --channel")
    one_line_error(
        ["bundle", "pull", "abab", "--channel", "production", "--out", out, "--service", "http://127.0.0.1:9"],
        "pass a bundle id or --channel",
    )
    one_line_error(["bundle", "pull", "--channel", " ", "--out", out, "--service", "x"], "--channel is empty")


@pytest.mark.slow
def test_pull_the_bundle_promoted_on_a_channel(built: b.BuildResult, keys: Keys, tmp_path: Path) -> None:
    """``bundle pull --channel production`` pulls the bundle promoted there now; a channel with none, or whose
    bundle hosts refuse, is one line."""
    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service") as service:
        args = ["--service", service.url, "--token", ADMIN]
        pushed = runner.invoke(app, ["bundle", "push", str(built.directory), *args])
        assert pushed.exit_code == 0, pushed.output
        promote = ["bundle", "promote", built.bundle_id[:12], "--channel", "production", "--new-channel", *args]
        for _ in range(60):  # the pushed record reaches the store through the service's spool
            promoted = runner.invoke(app, promote)
            if promoted.exit_code == 0:
                break
            assert "unknown bundle id" in promoted.output, promoted.output
            time.sleep(0.5)
        assert promoted.exit_code == 0, promoted.output
        out = tmp_path / "pulled"
        pulled = _ok(["bundle", "pull", "--channel", "production", "--out", str(out), *args])
        assert pulled == f"pulled {built.bundle_id} (promoted on production) into {out}"
        assert b.verify(out, keys.keyring).bundle_id == built.bundle_id
        text = one_line_error(["bundle", "pull", "--channel", "prodution", "--out", str(tmp_path / "x"), *args],
                              "no bundle is promoted on channel 'prodution'")  # fmt: skip
        assert "channels in use: production" in text
        _ok(["bundle", "revoke", built.bundle_id[:12], *args])
        text = one_line_error(["bundle", "pull", "--channel", "production", "--out", str(tmp_path / "y"), *args],
                              f"bundle {built.bundle_id[:12]}, promoted on production, is revoked")  # fmt: skip
        assert not (tmp_path / "x").exists()
        assert not (tmp_path / "y").exists()
