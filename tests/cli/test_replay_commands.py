"""``inferensics replay`` through a real service: bad input is one line, a captured request becomes a pack.

The service runs for real (``inferensics serve`` over an embedded chDB store); the request rows arrive
over OTLP from the host SDK's exporter, the inputs through the blob API.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.bundle.keys import KEYRING_ENV
from inferensics.cli.app import app
from inferensics.replay import read_pack
from inferensics.replay._internal.pack import write_safetensors
from inferensics.schema.events import RequestEvent
from tests.collector.service.harness import ADMIN, INGEST, READ, RunningService, new_service

runner = CliRunner()
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with new_service(tmp_path_factory.mktemp("svc"), via_cli=True) as svc:
        yield svc


def _request(request_id: str, capture: str, bundle_id: str = "", fp_status: str = "") -> RequestEvent:
    return RequestEvent(request_id=request_id, ts=datetime.now(UTC), host="h1", model="m", hw_pool="cpu",
                        traffic_class="batch", status="error", error="nan logits", capture_blob=capture,
                        bundle_id=bundle_id, fp_status=fp_status)  # fmt: skip


@pytest.fixture(scope="module")
def recorded(service: RunningService) -> dict[str, str]:
    import torch

    from inferensics.collector.host.otlp_exporter import OtlpExporter

    client = service.client(ADMIN)
    blob = client.put_blob(write_safetensors({"x": torch.ones(2, 8)}), "inputs")
    exporter = OtlpExporter(service.url, host="h1", token=INGEST)
    exporter.export_records([])
    exporter.export_request(_request("req-captured", blob, "b" * 64), [])
    unsampled = _request("req-unsampled", "", fp_status="unsampled").model_copy(update={"status": "ok", "error": ""})
    exporter.export_request(unsampled, [])
    nan_uncaptured = _request("req-nan-uncaptured", "").model_copy(
        update={"status": "ok", "error": "", "fp_status": "ok", "fp_nan": 1}
    )
    exporter.export_request(nan_uncaptured, [])
    exporter.export_request(_request("req-uncaptured", ""), [])
    exporter.flush()
    exporter.shutdown()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if client.query("request_detail", request_id="req-uncaptured").height:
                break
        except Exception:
            pass
        time.sleep(0.3)
    return {"blob": blob}


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real builder's public key: replay refuses to start without one, before anything else it checks."""
    from inferensics.bundle import generate_key

    _, pub, _ = generate_key(tmp_path_factory.mktemp("keys") / "builder")
    return pub


@pytest.fixture(autouse=True)
def _trusted(keyring: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYRING_ENV, str(keyring))


def _invoke(service: RunningService, *args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["replay", *args, "--service", service.url, "--token", ADMIN], env={"COLUMNS": "400"})
    return res.exit_code, res.output


def test_unknown_request_id_is_one_line(service: RunningService, recorded: dict[str, str]) -> None:
    code, out = _invoke(service, "no-such-request")
    assert code == 2, out
    assert out.strip().count("\n") == 0, out
    assert out.startswith("error: ")
    assert "no-such-request" in out


def test_an_unknown_request_id_is_said_before_the_keyring(
    service: RunningService, recorded: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a keyring an id the store does not hold was answered "no keyring of trusted builders": the request
    the user named is looked up first (a keyring would not make it replayable)."""
    with_keyring = _invoke(service, "no-such-request")
    monkeypatch.delenv(KEYRING_ENV)
    code, out = _invoke(service, "no-such-request")
    assert (code, out) == with_keyring  # the same line, as the lookup after the keyring says it
    assert out.startswith(
        f"error: the service at {service.url} (given by --service) answered: no request 'no-such-request' in the store"
    ), out


def test_request_without_captured_inputs_says_which_setting(service: RunningService, recorded: dict[str, str]) -> None:
    code, out = _invoke(service, "req-uncaptured")
    assert code == 2, out
    assert out.strip().count("\n") == 0, out
    assert "has no captured inputs" in out
    assert "CaptureRules(enabled=True" in out
    # When a host captures, not only how to turn capture on: it said "capture is off by default" of a request
    # served with capture on that had not failed.
    assert "requests that raise or give non-finite output, and a rate= sample of the rest" in out
    # The setting it names is one the SDK takes, spelled as printed (it named a HostConfig that does not exist).
    import inferensics.collector as sdk

    setting = re.search(r"instrument\(\.\.\., config=(\w+\(capture=\w+\([^)]*\)\))\)", out)
    assert setting, out
    config = eval(setting.group(1), {name: getattr(sdk, name) for name in sdk.__all__})
    assert isinstance(config, sdk.SdkConfig)
    assert config.capture.enabled


def test_request_whose_output_was_not_fingerprinted_says_so(service: RunningService, recorded: dict[str, str]) -> None:
    """A CPU host with capture on fingerprints one output in 32, so a NaN output of the other 31 is not seen
    and not captured; replay said "this request was none of those" of a request that gave NaN."""
    code, out = _invoke(service, "req-unsampled")
    assert code == 2, out
    assert out.strip().count("\n") == 0, out
    assert "has no captured inputs; its output was not fingerprinted (fp_status unsampled" in out
    assert "none of those" not in out
    import inferensics.collector as sdk

    setting = re.search(r"serve with (SdkConfig\(capture=\w+\([^)]*\), fingerprint_rate=1\.0\))", out)
    assert setting, out
    config = eval(setting.group(1), {name: getattr(sdk, name) for name in sdk.__all__})
    assert config.capture.enabled
    assert config.fingerprint_rate == 1.0


def test_a_failed_request_on_a_host_with_capture_off_says_it_failed(
    service: RunningService, recorded: dict[str, str]
) -> None:
    """Its row says NaN 1, as `requests --failing` lists it; replay said "this request was none of those"."""
    code, out = _invoke(service, "req-nan-uncaptured")
    assert code == 2, out
    assert out.strip().count("\n") == 0, out
    assert "none of those" not in out
    assert "request req-nan-uncaptured has no captured inputs, although it gave non-finite output (NaN 1): its " \
        "host (h1) did not capture it, most likely because capture was off there" in out  # fmt: skip
    assert "turn it on and replay the next occurrence; meanwhile `inferensics requests --failing --model m` lists " \
        "its siblings" in out  # fmt: skip
    code, out = _invoke(service, "req-uncaptured")  # status error: it raised
    assert "although it raised nan logits: its host (h1) did not capture it" in out, out


def test_a_pack_replay_through_the_service_is_recorded_against_its_request(
    service: RunningService, recorded: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`replay --pack DIR --service URL` printed the verdict and recorded nothing, silently."""
    from inferensics.cli import replay_commands
    from inferensics.replay import Verdict

    bundles = tmp_path / "bundles"
    (bundles / ("b" * 64)).mkdir(parents=True)
    (bundles / ("b" * 64) / "manifest.json").write_text("{}")
    pack = tmp_path / "pack"
    res = runner.invoke(app, ["replay", "req-captured", "--service", service.url, "--token", ADMIN, "--export",
                              str(pack)], env={"COLUMNS": "400", "INFERENSICS_BUNDLES": str(bundles)})  # fmt: skip
    assert res.exit_code == 0, res.output

    def fresh(pack: Path, **kwargs: object) -> dict[str, object]:
        return Verdict(category="lowering", op="aten.cos", culprit="lowering of aten.cos",
                       evidence={"request_id": "req-captured", "bundle_id": "b" * 64}).to_dict()  # fmt: skip

    monkeypatch.setattr(replay_commands, "_run_fresh", fresh)
    offline = runner.invoke(app, ["replay", "--pack", str(pack)], env={"COLUMNS": "400"})
    assert offline.exit_code == 0, offline.output
    assert "not recorded in replay_results: a --pack replay without --service asks no service" in offline.output
    code, out = _invoke(service, "--pack", str(pack))
    assert code == 0, out
    assert "recorded in replay_results" in out, out
    client = service.client(ADMIN)
    deadline = time.monotonic() + 60
    query = "SELECT attribution, request_host FROM replay_results WHERE request_id = 'req-captured'"
    while (rows := client.sql(query)).height == 0:
        assert time.monotonic() < deadline, "the verdict never reached the store"
        time.sleep(0.3)
    assert rows.row(0) == ("lowering", "h1")


def test_export_writes_a_verified_pack(service: RunningService, recorded: dict[str, str], tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    (bundles / ("b" * 64)).mkdir(parents=True)
    (bundles / ("b" * 64) / "manifest.json").write_text("{}")
    args = ["replay", "req-captured", "--service", service.url, "--token", ADMIN, "--export", str(tmp_path / "pack"),
            "--keyring", "keys/builder.pub"]  # fmt: skip
    res = runner.invoke(app, args, env={"COLUMNS": "400", "INFERENSICS_BUNDLES": str(bundles)})
    assert res.exit_code == 0, res.output
    pack = read_pack(tmp_path / "pack")
    assert pack.request_id == "req-captured"
    assert pack.inputs()["x"].shape == (2, 8)
    assert pack.bundle_dir is not None
    assert (pack.bundle_dir / "manifest.json").is_file()
    # The printed command runs as printed: the pack's bundle is verified again, so it needs the keyring too.
    assert f"`inferensics replay --pack {tmp_path / 'pack'} --keyring keys/builder.pub`" in res.output


def test_missing_bundle_is_one_line(service: RunningService, recorded: dict[str, str], tmp_path: Path) -> None:
    code, out = _invoke(service, "req-captured", "--export", str(tmp_path / "pack"))
    assert code == 2, out
    assert out.strip().count("\n") == 0, out
    assert "is not available here" in out
    assert "--bundle" in out


def test_altered_pack_and_bad_device_are_one_line(tmp_path: Path) -> None:
    res = runner.invoke(app, ["replay", "--pack", str(tmp_path)], env={"COLUMNS": "400"})
    assert res.exit_code == 2
    assert "is not a replay pack" in res.output
    assert res.output.strip().count("\n") == 0
    res = runner.invoke(app, ["replay", "--pack", str(tmp_path), "--device", "tpu"], env={"COLUMNS": "400"})
    assert res.exit_code == 2
    assert "is not a device" in res.output


def test_rows_recorded_through_the_service_say_whether_they_landed(service: RunningService) -> None:
    """A replay's result and a canary verdict go through the service's OTLP endpoint: a token without the
    ingest role is one line naming the refusal and what to do (it used to print "recorded" regardless)."""
    from inferensics.cli.service_records import record_through_service
    from inferensics.schema.events import CanaryVerdictEvent

    now = datetime.now(UTC)
    row = CanaryVerdictEvent(ts=now, model="m-rec", baseline="a", candidate="b", window_start=now,
                             window_end=now, verdict="fail", rule="failed: argmax_agreement")  # fmt: skip
    ok, line = record_through_service(service.url, READ, [row], "canary_verdicts")
    assert not ok
    assert line.startswith("not recorded in canary_verdicts: spans refused (auth): ")
    assert "HTTP 403" in line
    assert line.endswith("pass a token with the ingest (or admin) role: --token or $INFERENSICS_TOKEN")
    assert record_through_service(service.url, INGEST, [row], "canary_verdicts") == (
        True,
        "recorded in canary_verdicts",
    )
    client = service.client(ADMIN)
    deadline = time.monotonic() + 60
    while (found := client.sql("SELECT verdict FROM canary_verdicts WHERE model = 'm-rec'")).height == 0:
        assert time.monotonic() < deadline, "the verdict never reached the store"
        time.sleep(0.3)
    assert found.get_column("verdict").to_list() == ["fail"]


def test_the_verdict_is_found_among_what_the_replay_process_printed_after_it() -> None:
    # The executor prints its verdict as one JSON line; a model module printing at exit, or a compiler's
    # native output on the same descriptor, can come after it (the CLI read the last line: JSONDecodeError).
    from inferensics.cli.replay_commands import verdict_of

    line = '{"category": "inputs", "culprit": "input x", "evidence": {}}'
    want = {"category": "inputs", "culprit": "input x", "evidence": {}}
    assert verdict_of(f"{line}\nbye from the model\n") == want
    assert verdict_of(f"warming up\n{line}\n{{not json\n\n") == want
    assert verdict_of('{"not": "a verdict"}\n') is None
    assert verdict_of("") is None
