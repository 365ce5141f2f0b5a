"""What replay reads through a real service (``inferensics serve`` over an embedded chDB store): a request's
captured inputs only with the ``replay`` role, and one request of several that share an id only when the user
picks it.

What it got wrong: the service never checked the ``replay`` role (a ``read`` token fetched any request's captured
inputs, users' tensors, and ``read+replay`` granted nothing more); ``replay ID`` of an id two requests shared
(a client re-run reuses its ids) silently replayed the earlier one, and a pack of the later one was refused as
altered when checked against the store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from typer.testing import CliRunner

from inferensics.cli import replay_commands
from inferensics.cli.app import app
from inferensics.replay import Verdict
from inferensics.schema.events import RequestEvent
from tests.collector.service.harness import ADMIN, INGEST, RunningService
from tests.replay.served import put_inputs, running_service, seed_requests

runner = CliRunner()
pytestmark = pytest.mark.slow
READ, READ_REPLAY = "r-token", "rr-token"
T0 = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)  # within the requests' 30 days


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """``solo-1`` a request of its own; ``dup-1`` two requests (hosts h1 then h2, 24 minutes apart, other inputs);
    a generated-code blob beside the captured inputs."""
    tokens = f"{INGEST}=ingest,{READ}=read,{READ_REPLAY}=read+replay,{ADMIN}=admin"
    with running_service(tmp_path_factory.mktemp("svc"), tokens=tokens) as svc:
        first, second = put_inputs(svc, x=torch.ones(4, 8)), put_inputs(svc, x=torch.full((4, 8), 2.0))
        svc.client(ADMIN).put_blob(b"def call(args): pass\n", "output_code", "text/x-python")
        where = {"model": "m", "hw_pool": "cpu", "traffic_class": "batch", "status": "error", "error": "nan"}
        seed_requests(svc, [
            RequestEvent(request_id="solo-1", ts=T0, host="h1", capture_blob=first, **where),
            RequestEvent(request_id="dup-1", ts=T0 + timedelta(minutes=1), host="h1", capture_blob=first, **where),
            RequestEvent(request_id="dup-1", ts=T0 + timedelta(minutes=25), host="h2", capture_blob=second, **where),
        ])  # fmt: skip
        yield svc


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _replay(token: str, *args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["replay", *args, "--token", token], env={"COLUMNS": "400"})
    return res.exit_code, res.output


def _one_line_error(code: int, said: str) -> str:
    assert code == 2, said
    assert said.startswith("error: "), said
    assert said.strip().count("\n") == 0, said
    assert "Traceback" not in said
    return said.strip().removeprefix("error: ")


def test_captured_inputs_need_the_replay_role(service: RunningService) -> None:
    """A ``read`` token (the dashboard's) reads generated code, not users' inputs: 403 naming the role."""
    inputs = service.client(ADMIN).sql("SELECT capture_blob FROM requests WHERE request_id = 'solo-1'").item()
    code = _sha(b"def call(args): pass\n")

    def get(sha: str, token: str) -> httpx.Response:
        return httpx.get(f"{service.url}/api/v1/blobs/{sha}", headers={"Authorization": f"Bearer {token}"}, timeout=30)

    refused = get(inputs, READ)
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error.startswith("token lacks the 'replay' role: this blob is a request's captured inputs"), error
    assert "token=read+replay" in error
    for token in (READ_REPLAY, ADMIN):
        assert _sha(get(inputs, token).content) == inputs
    assert get(code, READ).status_code == 200  # the request page shows generated code with a read token
    assert get(inputs, INGEST).status_code == 403


def test_captured_inputs_need_the_replay_role_whatever_kind_they_were_uploaded_as(service: RunningService) -> None:
    """The role was decided on the uploader's free-text ``?kind=``: inputs uploaded as ``Inputs``, or with no kind
    and named by a request as its capture, were readable with a ``read`` token (walk 42). A kind that is no short
    name is refused and counted."""
    admin = service.client(ADMIN)
    upper = admin.put_blob(b"captured tensor X", "Inputs")
    unnamed = admin.put_blob(b"captured tensor Y", "")
    seed_requests(service, [RequestEvent(request_id="nokind-1", ts=T0 + timedelta(minutes=40), host="h1",
                                         capture_blob=unnamed, model="m", hw_pool="cpu", traffic_class="batch",
                                         status="error")])  # fmt: skip

    def get(sha: str, token: str) -> httpx.Response:
        return httpx.get(f"{service.url}/api/v1/blobs/{sha}", headers={"Authorization": f"Bearer {token}"}, timeout=30)

    for sha in (upper, unnamed):
        refused = get(sha, READ)
        assert refused.status_code == 403, (sha, refused.text)
        assert "captured inputs" in refused.json()["error"]
        assert get(sha, READ_REPLAY).status_code == 200
    before = _rejected(service, "bad_blob_kind")
    for kind in ("x" * 300, "in puts", "inputs\x00"):
        data = f"blob of kind {kind[:8]!r}".encode()
        answer = httpx.put(f"{service.url}/api/v1/blobs/{_sha(data)}", params={"kind": kind}, content=data,
                           headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)  # fmt: skip
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"].startswith("kind must be a short name"), answer.text
    assert _rejected(service, "bad_blob_kind") == before + 3


def _rejected(service: RunningService, reason: str) -> float:
    """The service's ``rejected_total`` count for ``reason`` (unit ``request``)."""
    text = httpx.get(f"{service.url}/metrics", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30).text
    for line in text.splitlines():
        if line.startswith("inferensics_collector_rejected_total{") and f'reason="{reason}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_replay_with_a_read_token_is_told_the_replay_role(service: RunningService, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()  # an export copies the bundle as it is: it is verified where the pack is replayed
    said = _one_line_error(*_replay(READ, "solo-1", "--service", service.url, "--bundle", str(bundle),
                                    "--export", str(tmp_path / "pack")))  # fmt: skip
    assert said.startswith(f"the captured inputs of solo-1 cannot be fetched: {service.url} refused the token ("), said
    assert "token lacks the 'replay' role" in said
    assert "the 'replay' role (its captured inputs)" in said
    assert "may have expired" not in said
    assert not (tmp_path / "pack").exists()
    code, out = _replay(READ_REPLAY, "solo-1", "--service", service.url, "--bundle", str(bundle),
                        "--export", str(tmp_path / "pack"))  # fmt: skip
    assert code == 0, out


def test_an_id_several_requests_share_is_listed_and_one_is_picked(service: RunningService, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    args = ("--service", service.url, "--bundle", str(bundle))
    said = _one_line_error(*_replay(ADMIN, "dup-1", *args, "--export", str(tmp_path / "none")))
    assert said.startswith(f"request id 'dup-1' names 2 requests in the store of the service at {service.url}"), said
    first, second = (T0 + timedelta(minutes=m) for m in (1, 25))
    assert f"1: {first.isoformat()} on host h1 (model m, error, inputs captured)" in said, said
    assert f"2: {second.isoformat()} on host h2 (model m, error, inputs captured)" in said, said
    assert said.endswith("pick one with --occurrence N (1 is the earliest, numbered as the dashboard's request page "
                         "numbers them)")  # fmt: skip
    assert not (tmp_path / "none").exists()
    # The later one, with its own inputs.
    pack = tmp_path / "pack"
    code, out = _replay(ADMIN, "dup-1", *args, "--occurrence", "2", "--export", str(pack))
    assert code == 0, out
    row = json.loads((pack / "pack.json").read_text())["request"]
    assert (row["host"], row["ts"]) == ("h2", second.isoformat())
    assert (pack / "inputs.safetensors").read_bytes() == service.client(ADMIN).get_blob(row["capture_blob"])
    # No such occurrence, and a bad number: one line each.
    said = _one_line_error(*_replay(ADMIN, "dup-1", *args, "--occurrence", "3", "--export", str(tmp_path / "x")))
    assert "names 2 requests in the store; there is no occurrence 3 (1 is the earliest)" in said, said
    said = _one_line_error(*_replay(ADMIN, "dup-1", *args, "--occurrence", "0"))
    assert said == "--occurrence 0: requests that share an id are numbered from 1 (the earliest)"
    # A unique id needs no flag (and takes --occurrence 1).
    code, out = _replay(ADMIN, "solo-1", *args, "--occurrence", "1", "--export", str(tmp_path / "solo"))
    assert code == 0, out


def test_a_pack_of_a_later_request_is_checked_against_its_own_row(
    service: RunningService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's digest for a pack's inputs is its own request's, not the earliest one's of the same id."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    pack = tmp_path / "pack"
    code, out = _replay(ADMIN, "dup-1", "--service", service.url, "--bundle", str(bundle), "--occurrence", "2",
                        "--export", str(pack))  # fmt: skip
    assert code == 0, out
    ran: dict[str, Any] = {}

    def fresh(pack: Path, **kwargs: Any) -> dict[str, Any]:
        ran.update(kwargs)
        return Verdict(category="none", evidence={"request_id": "dup-1"}).to_dict()

    monkeypatch.setattr(replay_commands, "_run_fresh", fresh)
    keyring = tmp_path / "keys.pub"
    keyring.write_text("")  # the executor (replaced here) loads it
    code, out = _replay(ADMIN, "--pack", str(pack), "--service", service.url, "--keyring", str(keyring))
    assert code == 0, out
    assert ran["recorded_inputs"] == json.loads((pack / "pack.json").read_text())["request"]["capture_blob"]
    said = _one_line_error(*_replay(ADMIN, "--pack", str(pack), "--occurrence", "2", "--keyring", str(keyring)))
    assert said.startswith("--occurrence picks one of the requests that share a REQUEST_ID"), said
