"""``inferensics replay REQUEST_ID`` through a real service (``inferensics serve`` over an embedded chDB store;
the request rows arrive over OTLP, the captured inputs through the blob API) and a real signed bundle.

What it got wrong: every replay left the request's captured inputs (tenant data) and a copy of the bundle in a
world-readable /tmp/inferensics-pack-XXXX/ for good; a keyring refusal named that copy instead of the user's
--bundle; an unknown id did not say which service was asked; a missing bundle said "set $INFERENSICS_BUNDLES"
to a user who had set it.
"""

from __future__ import annotations

import hashlib
import json
import stat
import tempfile
from collections.abc import Iterator
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
from inferensics.replay import write_pack
from inferensics.replay._internal.pack import write_safetensors
from inferensics.schema.events import RequestEvent
from tests.collector.service.harness import ADMIN, RunningService
from tests.replay.served import Built, build_bundle, put_inputs, running_service, seed_requests

runner = CliRunner()
pytestmark = pytest.mark.slow
ELSEWHERE = "c" * 64  # the bundle of a request that no folder here holds


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_bundle(tmp_path_factory.mktemp("cli-bundle"), model="tests.bundle.models:tiny_mlp",
                        inputs="tests.bundle.models:inputs", name="cli")  # fmt: skip


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, built: Built) -> Iterator[RunningService]:
    with running_service(tmp_path_factory.mktemp("svc")) as svc:
        blob = put_inputs(svc, x=torch.ones(4, 8))
        # req-old: a row of a request whose captured inputs were recorded without their digest (an older row).
        seed_requests(svc, [
            RequestEvent(request_id=request_id, ts=datetime.now(UTC), host="h1", model="m", hw_pool="cpu",
                         traffic_class="batch", status="error", error="nan logits", capture_blob=capture,
                         bundle_id=bundle_id)
            for request_id, bundle_id, capture in (("req-cli", built.bundle_id, blob),
                                                   ("req-elsewhere", ELSEWHERE, blob), ("req-old", built.bundle_id, ""))
        ])  # fmt: skip
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


def test_a_pack_whose_inputs_the_store_did_not_record_is_refused(
    service: RunningService, built: Built, tmp_path: Path
) -> None:
    """A pack's inputs swapped, and pack.json's hash of them and its copy of the request row's capture digest
    edited to match: ``replay --pack`` ran the other inputs as the request's. pack.json is not signed, so with a
    service named (``--service``) the inputs are checked against the digest the
    store recorded for the request; with none, the printed verdict says once that they were checked against the
    pack's own copy only. ``$INFERENSICS_SERVICE_URL`` alone asks no service (a pack runs offline): only
    ``--service`` does."""
    from tests.replay.test_pack import swap_inputs, swapped

    pack = tmp_path / "pack"
    exported = runner.invoke(app, ["replay", "req-cli", "--service", service.url, "--token", ADMIN, "--bundle",
                                   str(built.bundle), "--export", str(pack)], env={"COLUMNS": "400"})  # fmt: skip
    assert exported.exit_code == 0, exported.output
    recorded = json.loads((pack / "pack.json").read_text())["request"]["capture_blob"]
    other = write_safetensors({"x": torch.full((4, 8), 2.0)})
    swap_inputs(pack, other, row_too=True)
    refusal = swapped("req-cli", other, recorded, "the store")
    assert _replay("--pack", str(pack), "--service", service.url) == refusal
    # A pack of a request the store does not hold cannot be checked against it: said, not passed.
    meta = json.loads((pack / "pack.json").read_text())
    meta["request"]["request_id"] = "req-nowhere"
    (pack / "pack.json").write_text(json.dumps(meta))
    said = _replay("--pack", str(pack), "--service", service.url)
    assert said.startswith(
        f"the service at {service.url} (given by --service) answered: no request 'req-nowhere' in the store"
    ), said
    assert said.endswith(
        "; the pack's inputs cannot be checked against the digest recorded for them (to replay it against its own "
        "pack.json alone, leave out --service); if the request went to another service, pass its URL with --service"
    ), said
    # Unasked, the store cannot tell: the replay runs, and says once what the inputs were checked against. The
    # variable alone asks nothing (here it names a closed port, as on a GPU host that reaches no service).
    meta["request"]["request_id"] = "req-cli"
    (pack / "pack.json").write_text(json.dumps(meta))
    offline = {"COLUMNS": "400", "INFERENSICS_SERVICE_URL": "http://127.0.0.1:9"}
    ran = runner.invoke(app, ["replay", "--pack", str(pack)], env=offline)
    assert ran.exit_code == 0, ran.output
    note = (
        f"inputs: the pack's inputs (sha256 {_sha(other)[:12]}) were checked against request req-cli's row as "
        "copied into pack.json only, which whoever can edit the pack can change too: replay it with --service URL "
        "to check them against the digest the store recorded"
    )
    assert ran.output.count(note) == 1, ran.output


def test_a_store_row_without_a_capture_digest_is_said_once(
    service: RunningService, built: Built, tmp_path: Path
) -> None:
    """An older row records no digest of the request's captured inputs: the replay of its pack goes on, and its
    output says once that the inputs could not be checked against the store, rather than passing them as checked."""
    inputs = write_safetensors({"x": torch.ones(4, 8)})
    request = {"request_id": "req-old", "bundle_id": built.bundle_id, "model": "m", "graph_keys": []}
    pack = write_pack(tmp_path / "pack", request=request, inputs=inputs, bundle_dir=built.bundle)
    ran = runner.invoke(app, ["replay", "--pack", str(pack), "--service", service.url, "--token", ADMIN],
                        env={"COLUMNS": "400"})  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "verdict: " in ran.output
    note = (
        f"inputs: request req-old's row in the store records no digest of its captured inputs (an older row): the "
        f"pack's inputs (sha256 {_sha(inputs)[:12]}) were not checked against any recorded digest: request "
        "req-old's row in pack.json records none"
    )
    assert ran.output.count(note) == 1, ran.output
    assert ran.output.count("inputs: ") == 1, ran.output


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
