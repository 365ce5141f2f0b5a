"""``inferensics replay`` records a verdict only for a replay of what served the request, says which role a refusal
lacks, and replays revoked bundles: through a real service (``inferensics serve``, tokens with the roles of the
on-call walk) and a real signed bundle of a model whose factory lives in a project folder.

What it got wrong: a read+replay token was told the bundle was "not pushed to the service" (the lookup needs the
admin role); a replay-only token was told it lacked 'read' with no word of what replay needs; a verdict the service
refused to record still exited 0; a replay from a folder whose model.py changed after the build, and a --bundle
replay of a request served without a bundle, were recorded as the request's verdict; a revoked bundle could not be
replayed at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from inferensics.bundle.keys import KEYRING_ENV
from inferensics.bundle.states import STATES_ENV
from inferensics.cli.app import app
from inferensics.schema.events import RequestEvent
from tests.collector.service.harness import ADMIN, INGEST, RunningService
from tests.replay.served import build_bundle, put_inputs, running_service, seed_requests

runner = CliRunner()
pytestmark = pytest.mark.slow
READ_REPLAY, REPLAY_ONLY = "rr-token", "rp-token"
RAISED = "RuntimeError: CUDA error: an illegal memory access was encountered"
MODEL = """import torch


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()


def inputs(shape):
    return (torch.randn(tuple(shape), generator=torch.Generator().manual_seed(1)),)
"""


@dataclass(frozen=True)
class Project:
    folder: Path
    bundle: Path
    keyring: Path
    bundle_id: str


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    folder = tmp_path_factory.mktemp("proj")
    (folder / "walkmodel.py").write_text(MODEL)
    built = build_bundle(folder, model="walkmodel:build", inputs="walkmodel:inputs", name="walk", import_path=folder)
    return Project(folder, built.bundle, built.keyring, built.bundle_id)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, project: Project) -> Iterator[RunningService]:
    tokens = f"{INGEST}=ingest,{READ_REPLAY}=read+replay,{REPLAY_ONLY}=replay,{ADMIN}=admin"
    with running_service(tmp_path_factory.mktemp("svc"), tokens=tokens) as svc:
        blob = put_inputs(svc, x=torch.randn(4, 8, generator=torch.Generator().manual_seed(3)))
        seed_requests(svc, [
            RequestEvent(request_id=request_id, ts=datetime.now(UTC), host="h1", model="walk", hw_pool="cpu",
                         traffic_class="batch", status="ok", capture_blob=blob, bundle_id=bundle_id)
            for request_id, bundle_id in (("b-1", project.bundle_id), ("nb-1", ""))
        ] + [  # served by the bundle, NaN once or raised once: neither comes back when the bundle runs again
            RequestEvent(request_id="nan-1", ts=datetime.now(UTC), host="h1", model="walk", hw_pool="cpu",
                         traffic_class="batch", status="ok", capture_blob=blob, bundle_id=project.bundle_id,
                         fp_status="ok", fp_nan=1),
            RequestEvent(request_id="raise-1", ts=datetime.now(UTC), host="h1", model="walk", hw_pool="cpu",
                         traffic_class="batch", status="error", capture_blob=blob, bundle_id=project.bundle_id,
                         error=RAISED),
        ])  # fmt: skip
        yield svc


@pytest.fixture(autouse=True)
def _in_project(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYRING_ENV, str(project.keyring))
    monkeypatch.delenv(STATES_ENV, raising=False)
    monkeypatch.chdir(project.folder)


def _invoke(token: str, *args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["replay", *args, "--token", token], env={"COLUMNS": "400"})
    return res.exit_code, res.output


def _recorded(service: RunningService, request_id: str, *, awaited: int = 0) -> int:
    """The replay_results rows of ``request_id``, once ``awaited`` of them are there (the store writes in batches:
    polled, a minute at most); with none awaited, after the service's batch age (0.2 s) has passed five times over
    (a later replay of the same request that is recorded, counted exactly, shows that none came late)."""
    client = service.client(ADMIN)
    query = f"SELECT replay_id FROM replay_results WHERE request_id = '{request_id}'"
    if not awaited:
        time.sleep(1.0)
    deadline = time.monotonic() + 60
    while (found := int(client.sql(query).height)) < awaited and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def test_a_token_without_admin_is_told_the_role_not_not_pushed(service: RunningService) -> None:
    code, out = _invoke(READ_REPLAY, "b-1", "--service", service.url)
    assert code == 2, out
    assert out.startswith("error: bundle "), out
    assert "the token lacks the 'admin' role that reading pushed bundles needs" in out, out
    assert "not pushed" not in out


def test_a_token_without_read_is_told_the_roles_replay_needs(service: RunningService) -> None:
    code, out = _invoke(REPLAY_ONLY, "b-1", "--service", service.url)
    assert code == 2, out
    assert out.strip().count("\n") == 0, out
    assert "token lacks the 'read' role" in out, out
    assert "needs a token with the 'read' role" in out, out
    assert "'ingest' to record the verdict" in out, out


def test_a_verdict_the_service_refuses_to_record_exits_non_zero(service: RunningService, project: Project) -> None:
    code, out = _invoke(READ_REPLAY, "b-1", "--service", service.url, "--bundle", str(project.bundle))
    assert code == 2, out
    assert out.startswith("verdict: none"), out
    assert "error: the verdict above was not recorded in replay_results (" in out, out
    assert "recording needs a token with the 'ingest' role (or admin)" in out, out


def test_bundle_for_a_request_served_without_one_is_a_what_if(service: RunningService, project: Project) -> None:
    code, out = _invoke(ADMIN, "nb-1", "--service", service.url, "--bundle", str(project.bundle))
    assert code == 2, out
    assert out.startswith("error: request nb-1 was served without a bundle, so there is no signed code"), out
    assert "`--bundle DIR --what-if` replays it against a bundle of the same model" in out
    code, out = _invoke(ADMIN, "nb-1", "--service", service.url, "--bundle", str(project.bundle), "--what-if")
    assert code == 0, out
    assert "what-if, not the request as served (request nb-1 was served without a bundle)" in out, out
    assert "not recorded in replay_results: a what-if replay" in out, out
    assert _recorded(service, "nb-1") == 0


def test_changed_model_code_is_refused_and_a_what_if_is_not_recorded(
    service: RunningService, project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = tmp_path / "proj2"
    changed.mkdir()
    (changed / "walkmodel.py").write_text(MODEL.replace("torch.nn.GELU()", "torch.nn.ReLU()"))
    monkeypatch.chdir(changed)
    code, out = _invoke(ADMIN, "b-1", "--service", service.url, "--bundle", str(project.bundle))
    assert code == 2, out
    assert out.startswith("error: the bundle does not cover this replay's compile (code: the bundle holds another"), out
    assert "pass --what-if to replay anyway (not recorded)" in out
    code, out = _invoke(ADMIN, "b-1", "--service", service.url, "--bundle", str(project.bundle), "--what-if")
    assert code == 0, out
    assert "what-if, not the request as served (bundle miss: code: " in out, out
    assert "not recorded in replay_results: a what-if replay" in out
    assert _recorded(service, "b-1") == 0
    # From the build's folder the same replay is of what served, and recorded.
    monkeypatch.chdir(project.folder)
    code, out = _invoke(ADMIN, "b-1", "--service", service.url, "--bundle", str(project.bundle))
    assert code == 0, out
    assert "recorded in replay_results" in out, out
    assert "what-if" not in out, out
    assert _recorded(service, "b-1", awaited=1) == 1


def test_a_revoked_bundle_is_replayed_and_its_state_said(
    service: RunningService, project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = tmp_path / "states.json"
    states.write_text(json.dumps({"revoked": [project.bundle_id], "quarantined": []}))
    monkeypatch.setenv(STATES_ENV, str(states))
    code, out = _invoke(ADMIN, "b-1", "--service", service.url, "--bundle", str(project.bundle), "--no-record")
    assert code == 0, out
    assert f"[bundle {project.bundle_id[:12]} is revoked: replayed to investigate it]" in out, out


def test_a_request_served_without_a_bundle_gets_its_options_before_any_keyring(
    service: RunningService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It asked for a keyring first, then said "pass --bundle DIR", then refused --bundle as a what-if."""
    monkeypatch.delenv(KEYRING_ENV)
    code, out = _invoke(ADMIN, "nb-1", "--service", service.url, "--no-record")
    assert code == 2, out
    assert out.strip().count("\n") == 0, out
    assert out.startswith("error: request nb-1 was served without a bundle, so there is no signed code to "
                          "re-execute; options: (a) `--bundle DIR --what-if`"), out  # fmt: skip
    assert "keyring" not in out
    assert "(b) `--export DIR` writes its captured inputs" in out
    # Option (b) works as said: the export holds the inputs only, and says how to investigate them.
    code, out = _invoke(ADMIN, "nb-1", "--service", service.url, "--export", str(tmp_path / "nb"))
    assert code == 0, out
    assert "the request was served without a bundle, so the pack holds its captured inputs only" in out, out
    from inferensics.replay import read_pack

    assert read_pack(tmp_path / "nb").inputs()["x"].shape == (4, 8)


def test_a_nan_the_bundle_does_not_give_again_is_not_reproduced(service: RunningService, project: Project) -> None:
    """A request whose row recorded NaN, re-executed finite, was "verdict: none", "the served output is within
    tolerance", and recorded so on the request's page."""
    code, out = _invoke(ADMIN, "nan-1", "--service", service.url, "--bundle", str(project.bundle))
    assert code == 0, out
    assert out.startswith("verdict: NOT REPRODUCED (none)"), out
    assert ("not reproduced: the served output had 1 NaN; re-executing the same bundle on the captured inputs is "
            "finite and within tolerance") in out  # fmt: skip
    assert "suspect nondeterminism, hardware, concurrency or code outside the compiled graph" in out
    assert "the served output is within tolerance" not in out
    assert "rung re-executed bundle: pass" in out, out
    assert "rung served" not in out
    assert "next: replay it a few more times" in out
    assert _recorded(service, "nan-1", awaited=1) == 1
    rows = service.client(ADMIN).sql("SELECT attribution, reproduced, detail FROM replay_results "
                                     "WHERE request_id = 'nan-1'")  # fmt: skip
    assert rows.height == 1
    assert rows.item(0, "attribution") == "none"
    assert not rows.item(0, "reproduced")
    assert str(rows.item(0, "detail")).startswith("not reproduced: the served output had 1 NaN")


def test_a_request_that_raised_and_runs_clean_again_is_not_reproduced(
    service: RunningService, project: Project
) -> None:
    code, out = _invoke(ADMIN, "raise-1", "--service", service.url, "--bundle", str(project.bundle), "--no-record")
    assert code == 0, out
    assert out.startswith("verdict: NOT REPRODUCED (none)"), out
    assert f"not reproduced: the request raised {RAISED}; re-executing the same bundle" in out, out
    assert "the served output had" not in out
    assert "the served output is within tolerance" not in out


def test_an_export_names_the_modules_it_needs_and_a_replay_without_them_says_how(
    service: RunningService, project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export line said the pack "needs torch and pydantic only"; elsewhere it failed on the model's module."""
    pack = tmp_path / "pack"
    code, out = _invoke(ADMIN, "b-1", "--service", service.url, "--bundle", str(project.bundle), "--export", str(pack))
    assert code == 0, out
    assert ("(needs torch and pydantic, and the modules it imports by name: walkmodel (copy walkmodel.py beside "
            "where you replay it, or put their folder on PYTHONPATH))") in out, out  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = runner.invoke(app, ["replay", "--pack", str(pack)], env={"COLUMNS": "400"})
    assert res.exit_code == 2, res.output
    assert "copy walkmodel.py here, or put its folder on PYTHONPATH" in res.output, res.output
