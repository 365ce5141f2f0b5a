"""``inferensics replay``'s folders: nothing already there is replaced, and a path the replay cannot write is
one line before any work.

``--export DIR`` removed whatever DIR held (``--export .`` the working directory, ``--bundle B --export B`` the
bundle), ``--out FILE`` failed only after the whole replay (``replay failed: FileExistsError``), and ``--out``
listed a repro left there by a replay of another request as this verdict's. No service runs here: every
refusal comes before the service is asked (the URL below answers nothing).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from inferensics.bundle.errors import BundleError
from inferensics.bundle.keys import KEYRING_ENV, Keyring
from inferensics.cli import replay_commands
from inferensics.cli.app import app
from inferensics.replay import ReplayError, Verdict, write_pack
from inferensics.replay._internal import report
from inferensics.replay._internal.pack import PACK_FILE, write_safetensors
from tests.loopback import serving

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "http://127.0.0.1:9"  # a closed port: a refusal that came after asking it would say so
runner = CliRunner()


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real builder's public key (`inferensics bundle keygen`'s): the replays below get past the keyring check
    to the refusal each one is about."""
    from inferensics.bundle import generate_key

    _, pub, _ = generate_key(tmp_path_factory.mktemp("keys") / "builder")
    return pub


@pytest.fixture(autouse=True)
def _trusted(keyring: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYRING_ENV, str(keyring))


def _replay(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["replay", *args], env={"COLUMNS": "400"})
    return res.exit_code, res.output


def _one_line_error(code: int, said: str) -> str:
    assert code == 2, said
    assert said.startswith("error: "), said
    assert said.strip().count("\n") == 0, said
    return said.strip().removeprefix("error: ")


def _pack(root: Path, request_id: str = "req-1") -> Path:
    request = {"request_id": request_id, "bundle_id": "", "graph_keys": []}
    return write_pack(root / "pack", request=request, inputs=write_safetensors({"x": torch.ones(2, 3)}))


def _folder_with(root: Path, *names: str) -> Path:
    root.mkdir(parents=True)
    for name in names:
        (root / name).write_text(f"{name} of the user\n")
    return root


def _kept(root: Path, *names: str) -> None:
    assert sorted(p.name for p in root.iterdir()) == sorted(names)
    assert all((root / n).read_text() == f"{n} of the user\n" for n in names)


def test_write_pack_never_replaces_a_folder(tmp_path: Path) -> None:
    full = _folder_with(tmp_path / "victim", "manifest.json")
    request = {"request_id": "req-1", "bundle_id": ""}
    with pytest.raises(ReplayError, match=r"victim exists and is not empty: choose a new --export folder$"):
        write_pack(full, request=request, inputs=write_safetensors({"x": torch.ones(1)}))
    _kept(full, "manifest.json")
    with pytest.raises(ReplayError, match=r"is inside the bundle folder .*victim: choose an --export folder outside"):
        write_pack(full / "pack", request=request, inputs=b"", bundle_dir=full)
    _kept(full, "manifest.json")
    # A new pack folder is private: it holds a request's captured inputs (tenant data).
    fresh = write_pack(tmp_path / "new" / "pack", request=request, inputs=write_safetensors({"x": torch.ones(1)}))
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (write_pack(empty, request=request, inputs=b"") / "pack.json").is_file()


def test_export_into_a_folder_with_files_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _folder_with(tmp_path / "victim", "manifest.json")
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--bundle", str(bundle), "--export", str(bundle)))
    assert said == f"--export {bundle} exists and is not empty: choose a new --export folder"
    _kept(bundle, "manifest.json")
    work = _folder_with(tmp_path / "work", "notes.txt")
    monkeypatch.chdir(work)
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--export", "."))
    assert said == "--export . exists and is not empty: choose a new --export folder"
    _kept(work, "notes.txt")
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--export", "notes.txt"))
    assert said == "--export notes.txt exists and is not a folder: choose a new --export folder"
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--bundle", ".", "--export", "sub/pack"))
    assert said == "--export sub/pack is inside the bundle folder .: choose an --export folder outside it"
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--bundle", "absent"))
    assert said == "--bundle absent does not exist: pass the bundle folder or .tar that served the request"
    _kept(work, "notes.txt")


def test_an_import_path_that_is_no_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    """``--import-path DIR`` names where the bundle's modules (its --inputs function too) are imported from."""
    absent = tmp_path / "absent"
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--import-path", str(absent)))
    assert said == f"--import-path {absent} is not a folder: pass the folder that holds the bundle's modules"


def test_out_that_cannot_be_a_folder_is_refused_before_the_replay(tmp_path: Path) -> None:
    shapes = _folder_with(tmp_path / "work", "shapes.json") / "shapes.json"
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--out", str(shapes)))
    assert said == f"--out {shapes} is a file, not a folder: pass a folder for the reports"
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--out", str(shapes / "reports")))
    assert said == f"--out {shapes / 'reports'} cannot be created ({shapes} is a file): pass a folder for the reports"
    # Of a --pack replay the executor checks it, before the bundle (this pack has none) or any compile.
    pack = _pack(tmp_path)
    said = _one_line_error(*_replay("--pack", str(pack), "--out", str(shapes)))
    assert said == f"--out {shapes} is a file, not a folder: pass a folder for the reports"
    _kept(shapes.parent, "shapes.json")


def _earlier_report(out: Path, request_id: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdict.json").write_text(Verdict(category="lowering", evidence={"request_id": request_id}).to_json())
    (out / "repro.py").write_text("# the repro of an earlier replay\n")
    (out / "repro_inputs.pt").write_bytes(b"earlier")


def test_out_holding_another_requests_report_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _earlier_report(out, "req-other")
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE, "--out", str(out)))
    assert (
        said == f"--out {out} holds the report of request req-other: pass a new folder for the report of request req-1"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "inferensics.replay", "--pack", str(_pack(tmp_path)), "--out", str(out)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == (
        f"error: --out {out} holds the report of request req-other: pass a new folder for the report of request req-1\n"
    )
    assert (out / "repro.py").read_text() == "# the repro of an earlier replay\n"
    (out / "verdict.json").unlink()  # a repro whose report is gone is of unknown origin: not ours to replace
    assert report.out_problem(out, "req-1") == (
        f"--out {out} holds repro.py of another replay: pass a new folder for the report of request req-1"
    )
    assert report.out_problem(out, None) == ""  # the request is not known yet: the folder itself is fine


def test_a_report_without_a_repro_removes_this_requests_earlier_repro(tmp_path: Path) -> None:
    """The CLI lists the report files in --out after the replay: an earlier replay's repro.py was listed, and
    read, as this verdict's."""
    out = tmp_path / "out"
    _earlier_report(out, "req-1")
    (out / "notes.txt").write_text("the user's\n")
    verdict = Verdict(category="inputs", evidence={"request_id": "req-1"})
    report.write_reports(out, verdict, request_id="req-1")
    assert report.write_repro(out, verdict, None, request_id="req-1", pack_digest="0" * 64, compile_kwargs={}) is None
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "verdict.json", "verdict.md"]
    assert json.loads((out / "verdict.json").read_text())["category"] == "inputs"
    assert report.out_problem(out, "req-1") == ""  # this request's own report is replaced on the next replay


def test_the_service_asked_is_named_with_where_its_url_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    from inferensics.cli.replay_commands import _source_of

    monkeypatch.delenv("INFERENSICS_SERVICE_URL", raising=False)
    assert _source_of(None) == "the default: neither --service nor $INFERENSICS_SERVICE_URL is set"
    assert _source_of("http://svc:4318") == "given by --service"
    monkeypatch.setenv("INFERENSICS_SERVICE_URL", "http://svc:4318")
    assert _source_of(None) == "from $INFERENSICS_SERVICE_URL"


class _FailingQueries(BaseHTTPRequestHandler):
    """A service whose named queries fail (500): the request's row cannot be read, so the keyring refusal stands."""

    def do_POST(self) -> None:
        body = b'{"error": "request_detail failed: the engine stopped"}'
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.mark.parametrize("where", ["req-1", "--pack"])
def test_no_keyring_is_refused_before_the_bundle_part_torch_or_the_service(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a keyring, `inferensics replay ID` fetched the pack and started the replay process, which said so
    after some 16 s of imports. Now it is the first refusal, in Keyring.load's words, in a process that has not
    imported torch or the bundle part (a child process: this one has both)."""
    monkeypatch.delenv(KEYRING_ENV)
    pack = _pack(tmp_path)
    with serving(_FailingQueries) as failing:
        args = ["req-1", "--service", failing] if where == "req-1" else ["--pack", str(pack)]
        code = (
            "import sys\n"
            "from inferensics.cli.app import app\n"
            "try:\n"
            f"    app({['replay', *args]!r})\n"
            "except SystemExit as done:\n"
            "    print('exit', done.code, sorted(m for m in ('torch', 'inferensics.bundle', 'inferensics.replay', "
            "'httpx') if m in sys.modules))\n"
        )
        env = {k: v for k, v in os.environ.items() if k != KEYRING_ENV} | {"COLUMNS": "400"}
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
        )
    with pytest.raises(BundleError) as loaded:
        Keyring.load(None)
    assert proc.stderr == f"error: {loaded.value}\n"
    # A request's row is looked up first (a request served without a bundle needs no keyring: its refusal says what
    # it needs instead); a service that fails to answer leaves the keyring refusal, still before torch and bundle.
    assert proc.stdout == ("exit 2 ['httpx']\n" if where == "req-1" else "exit 2 []\n")


def test_a_pack_that_is_not_there_is_said_before_the_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`replay --pack /nonexistent` answered "no keyring of trusted builders": what the user named is checked first,
    and a keyring would not have made it replayable."""
    monkeypatch.delenv(KEYRING_ENV)
    missing = tmp_path / "nonexistent"
    said = _one_line_error(*_replay("--pack", str(missing)))
    assert said.startswith(f"--pack {missing} does not exist: pass the folder a replay's --export wrote"), said
    a_file = _folder_with(tmp_path / "files", "notes.txt") / "notes.txt"
    said = _one_line_error(*_replay("--pack", str(a_file)))
    assert said.startswith(f"--pack {a_file} is not a folder"), said
    said = _one_line_error(*_replay("--pack", str(tmp_path / "files")))
    assert said == (
        f"--pack {tmp_path / 'files'} is not a replay pack (no pack.json): export one with `inferensics replay "
        "REQUEST_ID --export DIR`"
    )
    assert replay_commands.PACK_FILE == PACK_FILE  # spelled in the CLI to be read before the replay part loads


def test_an_unreachable_service_is_said_before_the_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    """`replay ID` against a service that does not answer said "no keyring of trusted builders"; with one, the
    next try said the service was unreachable. The service the user named is checked first."""
    monkeypatch.delenv(KEYRING_ENV)
    said = _one_line_error(*_replay("req-1", "--service", NOWHERE))
    assert said.startswith(f"cannot reach the inferensics service at {NOWHERE}: "), said
    assert "is it running (`inferensics serve`)? Pass its URL with --service" in said


def test_a_keyring_that_does_not_exist_is_refused_in_keyring_loads_words(tmp_path: Path) -> None:
    missing = tmp_path / "keys" / "builder.pub"
    with serving(_FailingQueries) as failing:  # the request's row is looked up first; one that cannot be read
        said = _one_line_error(*_replay("req-1", "--service", failing, "--keyring", str(missing)))
    with pytest.raises(BundleError) as loaded:
        Keyring.load(str(missing))
    assert said == str(loaded.value)
    assert replay_commands.KEYRING_ENV == KEYRING_ENV  # spelled in the CLI to be read before the bundle part loads


def test_a_pack_replay_asks_no_service_that_only_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`replay --pack` asked the service whenever $INFERENSICS_SERVICE_URL was set, so on a GPU host that reaches
    none (the variable set for the serving process) it failed naming the unreachable service. A pack is
    self-contained: only --service asks the store (to check the pack's inputs against the digest it recorded)."""
    ran: dict[str, object] = {}

    def fresh(pack: Path, **kwargs: object) -> dict[str, object]:
        ran.update(kwargs, pack=pack)
        return Verdict(category="none", evidence={"request_id": "req-1"}).to_dict()

    monkeypatch.setattr(replay_commands, "_run_fresh", fresh)
    pack = _pack(tmp_path)
    offline = {"COLUMNS": "400", "INFERENSICS_SERVICE_URL": NOWHERE}  # set, as for the serving process
    res = runner.invoke(app, ["replay", "--pack", str(pack)], env=offline)
    assert res.exit_code == 0, res.output
    assert res.output.startswith("verdict: none"), res.output
    assert ran["pack"] == pack
    assert ran["recorded_inputs"] is None  # the store was not asked
    # Asked for with --service, it is asked, and a service that does not answer is said in one line.
    ran.clear()
    said = _one_line_error(*_replay("--pack", str(pack), "--service", NOWHERE))
    assert "127.0.0.1:9" in said, said
    assert ran == {}


def test_a_customisation_that_cannot_be_imported_says_how_to_make_it_importable() -> None:
    """A pack replayed in a folder without the customisation's module said "No module named 'faults_mod'" only."""
    from inferensics.replay._internal.executor import _copy_hint

    said = "customisation faults_mod:silu_off cannot be imported here: No module named 'faults_mod'"
    assert _copy_hint(said) == ": copy faults_mod.py here (where you replay it) or put its folder on PYTHONPATH"
    assert _copy_hint("customisation pkg.mod:fn cannot be imported here: x").startswith(": copy pkg/mod.py here")
    assert _copy_hint("bundle abc is revoked") == ""
