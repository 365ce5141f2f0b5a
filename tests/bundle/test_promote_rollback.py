"""``inferensics bundle promote`` names the channel's rollback target: the newest earlier bundle promoted on that
channel that is not revoked, or says plainly that there is none. Against a real embedded store."""

from __future__ import annotations

from datetime import UTC, datetime

from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.schema.events import BundleEvent
from inferensics.schema.store import Store

runner = CliRunner()

A, B, C = "ab" * 32, "cd" * 32, "ef" * 32


def _dsn(store: Store, *ids: str) -> str:
    store.insert_events([BundleEvent(ts=datetime.now(UTC), bundle_id=i, model="tiny", host="h") for i in ids])
    return f"chdb://{store.dsn.path}?database={store.database}"


def _ok(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return res.output.strip()


def _recorded_previous(store: Store, bundle_id: str) -> str:
    rows = store.query_rows(
        f"SELECT previous_bundle_id FROM {store.database}.bundle_states WHERE state = 'promoted' "
        f"AND bundle_id = '{bundle_id}'"
    )
    return str(rows[0][0])


def test_rollback_target_skips_the_revoked_last_bundle(store: Store) -> None:
    """The channel's last bundle was revoked: the bundle promoted next named it for rollback (and recorded it as
    the previous bundle), though hosts refuse it. The target is the newest earlier bundle not revoked."""
    dsn = _dsn(store, A, B, C)
    _ok(["bundle", "promote", A[:8], "--channel", "prod", "--new-channel", "--dsn", dsn])
    _ok(["bundle", "promote", B[:8], "--channel", "prod", "--dsn", dsn])
    _ok(["bundle", "revoke", B[:8], "--dsn", dsn])
    out = _ok(["bundle", "promote", C[:8], "--channel", "prod", "--dsn", dsn])
    assert out == f"promoted {C[:16]} on prod (previous {A[:12]} kept for rollback)"
    assert _recorded_previous(store, C) == A


def test_no_rollback_target_is_said_plainly(store: Store) -> None:
    """The only earlier bundle on the channel is revoked: nothing to roll back to, and the line says so."""
    dsn = _dsn(store, A, B)
    _ok(["bundle", "promote", A[:8], "--channel", "prod", "--new-channel", "--dsn", dsn])
    _ok(["bundle", "revoke", A[:8], "--dsn", dsn])
    out = _ok(["bundle", "promote", B[:8], "--channel", "prod", "--dsn", dsn])
    assert out == f"promoted {B[:16]} on prod (no rollback target: no earlier bundle on prod that is not revoked)"
    assert _recorded_previous(store, B) == ""


def test_rollback_target_is_per_channel(store: Store) -> None:
    """A bundle promoted on another channel is not this channel's rollback target."""
    dsn = _dsn(store, A, B, C)
    _ok(["bundle", "promote", A[:8], "--channel", "prod", "--new-channel", "--dsn", dsn])
    _ok(["bundle", "promote", B[:8], "--channel", "canary", "--new-channel", "--dsn", dsn])
    out = _ok(["bundle", "promote", C[:8], "--channel", "prod", "--dsn", dsn])
    assert out.endswith(f"(previous {A[:12]} kept for rollback)")
