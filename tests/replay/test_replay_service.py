"""``inferensics replay REQUEST_ID`` through a real service (``inferensics serve`` over an embedded chDB store;
the request rows arrive over OTLP, the captured inputs through the blob API) and a real signed bundle.

What it got wrong: every replay left the request's captured inputs (tenant data) and a copy of the bundle in a
world-readable /tmp/inferensics-pack-XXXX/ for good; a keyring refusal named that copy instead of the user's
--bundle; an unknown id did not say which service was asked; a missing bundle said "set $INFERENSICS_BUNDLES"
to a user who had set it.
"""

from __future__ import annotations

import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle.keys import KEYRING_ENV
from inferensics.cli import replay_commands
from inferensics.cli.app import app
from inferensics.replay._internal.pack import write_safetensors
from inferensics.schema.events import RequestEvent
from tests.collector.service.harness import ADMIN, INGEST, RunningService, new_service

runner = CliRunner()
pytestmark = pytest.mark.slow
ELSEWHERE = "c" * 64  # the bundle of a request that no folder here holds


@dataclass(frozen=True)
class Built:
    bundle: Path
    keyring: Path
    bundle_id: str


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    d = tmp_path_factory.mktemp("cli-bundle")
    priv, pub, _ = b.generate_key(d / "builder")
    spec = b.BuildSpec(model="tests.bundle.models:tiny_mlp", inputs="tests.bundle.models:inputs",
                       shapes=b.ShapeDistribution.of([(4, 8)]), advise=False, name="cli", repeats=1)  # fmt: skip
    result = b.build(spec, b.load_signing_key(priv), d / "bundle")
    return Built(result.directory, pub, result.bundle_id)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, built: Built) -> Iterator[RunningService]:
    from inferensics.collector.host.otlp_exporter import OtlpExporter

    with new_service(tmp_path_factory.mktemp("svc"), via_cli=True) as svc:
        client = svc.client(ADMIN)
        blob = client.put_blob(write_safetensors({"x": torch.ones(4, 8)}), "inputs")
        exporter = OtlpExporter(svc.url, host="h1", token=INGEST)
        for request_id, bundle_id in (("req-cli", built.bundle_id), ("req-elsewhere", ELSEWHERE)):
            request = RequestEvent(request_id=request_id, ts=datetime.now(UTC), host="h1", model="m", hw_pool="cpu",
                                   traffic_class="batch", status="error", error="nan logits", capture_blob=blob,
                                   bundle_id=bundle_id)  # fmt: skip
            exporter.export_request(request, [])
        exporter.flush()
        exporter.shutdown()
        deadline = time.monotonic() + 60
        while not client.sql("SELECT request_id FROM requests WHERE request_id = 'req-elsewhere'").height:
            assert time.monotonic() < deadline, "the requests never reached the store"
            time.sleep(0.3)
        yield svc


@pytest.fixture(autouse=True)
def _trusted(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder's key in $INFERENSICS_BUNDLE_KEYRING: replay refuses to start without a keyring, before it asks
    the service (tests/replay/test_replay_paths.py)."""
    monkeypatch.setenv(KEYRING_ENV, str(built.keyring))


def _replay(*args: str, env: dict[str, str | None] | None = None) -> str:
    res = runner.invoke(app, ["replay", *args, "--token", ADMIN], env={"COLUMNS": "400", **(env or {})})
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: "), res.output
    assert res.output.strip().count("\n") == 0, res.output
    return res.output.strip().removeprefix("error: ")


def test_the_pack_is_private_and_removed_and_a_refusal_names_the_users_bundle(
    service: RunningService, built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    seen: list[int] = []
    run_fresh = replay_commands._run_fresh

    def watched(pack: Path, **kwargs: Any) -> dict[str, Any]:
        # While the executor runs: the pack holds the captured inputs, under a folder only its owner reads.
        assert (pack / "inputs.safetensors").is_file()
        seen.extend(stat.S_IMODE(p.stat().st_mode) for p in (pack, pack.parent))
        return run_fresh(pack, **kwargs)

    monkeypatch.setattr(replay_commands, "_run_fresh", watched)
    _, other, _ = b.generate_key(tmp_path / "other")
    said = _replay("req-cli", "--service", service.url, "--bundle", str(built.bundle), "--keyring", str(other))
    assert seen == [0o700, 0o700]
    assert list(scratch.iterdir()) == [], "the pack outlived the replay"
    assert said.startswith(f"{built.bundle}/manifest.json is signed by builder key "), said
    assert "inferensics-pack" not in said
    # A packed bundle is named as its archive.
    tar = b.pack(built.bundle, tmp_path / "cli.tar")
    said = _replay("req-cli", "--service", service.url, "--bundle", str(tar), "--keyring", str(other))
    assert said.startswith(f"{tar} is signed by builder key "), said
    assert list(scratch.iterdir()) == []


def test_an_unknown_request_names_the_service_asked(service: RunningService) -> None:
    said = _replay("req-nope", "--service", service.url)
    assert said.startswith(f"the service at {service.url} (given by --service) answered: no request 'req-nope' in"), (
        said
    )
    assert said.endswith("if the request went to another service, pass its URL with --service")
    assert "/api/v1/query" not in said
    said = _replay("req-nope", env={"INFERENSICS_SERVICE_URL": service.url})
    assert said.startswith(f"the service at {service.url} (from $INFERENSICS_SERVICE_URL) answered: "), said


def test_a_missing_bundle_names_the_bundles_folder_searched(service: RunningService, tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    said = _replay("req-elsewhere", "--service", service.url, "--export", str(tmp_path / "pack"),
                   env={"INFERENSICS_BUNDLES": str(bundles)})  # fmt: skip
    assert said == (
        f"bundle {ELSEWHERE[:16]} is not in $INFERENSICS_BUNDLES ({bundles}: no {ELSEWHERE}/ or {ELSEWHERE}.tar) "
        "and was not pushed to the service: put it there, push it (`inferensics bundle push`) or pass --bundle DIR"
    )
    assert not (tmp_path / "pack").exists()
    said = _replay("req-elsewhere", "--service", service.url, "--export", str(tmp_path / "pack"),
                   env={"INFERENSICS_BUNDLES": None})  # fmt: skip
    assert said == (
        f"bundle {ELSEWHERE[:16]} is not available here (not pushed to the service): pass --bundle DIR or set "
        "$INFERENSICS_BUNDLES"
    )
