"""``bundle push`` / ``pull`` / ``promote`` through a running collector service (blob API, OTLP records,
SQL API), and the pulled bundle verifies."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.cli.app import app
from tests.bundle.conftest import Keys
from tests.collector.service.harness import ADMIN, new_service

pytestmark = pytest.mark.slow
runner = CliRunner()


def test_push_pull_promote_through_the_service(built: b.BuildResult, keys: Keys, tmp_path: Path) -> None:
    (tmp_path / "service").mkdir()
    service = new_service(tmp_path / "service").start()
    try:
        args = ["--service", service.url, "--token", ADMIN]
        pushed = runner.invoke(app, ["bundle", "push", str(built.directory), *args])
        assert pushed.exit_code == 0, pushed.output
        assert built.bundle_id in pushed.output
        out = tmp_path / "pulled"
        for _ in range(60):  # the pushed record reaches the store through the service's spool
            pulled = runner.invoke(app, ["bundle", "pull", built.bundle_id[:12], "--out", str(out), *args])
            if pulled.exit_code == 0:
                break
            assert "unknown bundle id" in pulled.output, pulled.output
            time.sleep(0.5)
        assert pulled.exit_code == 0, pulled.output
        assert b.verify(out, keys.keyring).bundle_id == built.bundle_id
        # The push names the bundle: the Bundles page's picker shows it before any host registers it.
        name = service.client().sql("SELECT attrs['bundle_name'] FROM bundle_states WHERE state = 'pushed'").item()
        assert name == b.read_manifest(built.directory).name == "tiny"
        promoted = runner.invoke(app, ["bundle", "promote", built.bundle_id[:12], "--channel", "prod", *args])
        assert promoted.exit_code == 0, promoted.output
        unknown = runner.invoke(app, ["bundle", "pull", "fff", "--out", str(tmp_path / "x"), *args])
        assert unknown.exit_code != 0
        assert unknown.output.strip().startswith("error: unknown bundle id fff")
    finally:
        service.stop()


def test_a_state_command_returns_once_the_service_has_written_it(built: b.BuildResult, tmp_path: Path) -> None:
    """Through a service a state went out as an OTLP record and the command returned at once, before the
    service's next batch wrote it: ``bundle states`` right after ``bundle revoke`` wrote a states file without
    the revoke (hosts kept loading the bundle), and ``bundle release`` right after it was not refused. Seen
    on the demo's store (the service's default 1 s batches); here the batches wait 3 s."""
    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service", batch_max_age_s="3") as service:
        args = ["--service", service.url, "--token", ADMIN]
        pushed = runner.invoke(app, ["bundle", "push", str(built.directory), *args])
        assert pushed.exit_code == 0, pushed.output
        revoked = runner.invoke(app, ["bundle", "revoke", built.bundle_id[:12], *args])
        assert revoked.exit_code == 0, revoked.output
        released = runner.invoke(app, ["bundle", "release", built.bundle_id[:12], *args])
        assert released.exit_code == 2, released.output
        assert "a revocation is final" in released.output
        out = tmp_path / "states.json"
        states = runner.invoke(app, ["bundle", "states", "--out", str(out), *args])
        assert states.exit_code == 0, states.output
        assert b.BundleStates.load(out).revoked == frozenset({built.bundle_id})
