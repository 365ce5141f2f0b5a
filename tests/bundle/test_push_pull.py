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
        promoted = runner.invoke(app, ["bundle", "promote", built.bundle_id[:12], "--channel", "prod", *args])
        assert promoted.exit_code == 0, promoted.output
        unknown = runner.invoke(app, ["bundle", "pull", "fff", "--out", str(tmp_path / "x"), *args])
        assert unknown.exit_code != 0
        assert unknown.output.strip().startswith("error: unknown bundle id fff")
    finally:
        service.stop()
