"""``bundle build --shapes-from-service`` on traffic where some requests failed: a shape seen only on failed
requests is left out and counted, and a traffic shape the model cannot run eagerly is found before anything is
compiled, named with the requests it came from, and left out (listed) with ``--skip-unrunnable-shapes``. Against
a real service (embedded chDB store) holding recorded requests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.cli.app import app
from tests.bundle.conftest import INPUTS, MODEL, Keys, one_line_error
from tests.bundle.traffic import ROOT, clean_env, traffic_service
from tests.collector.service.harness import ADMIN, RunningService

pytestmark = pytest.mark.slow

TRAFFIC = [("2x8", "ok", 3), ("2x8", "error", 1), ("3x17", "error", 2), ("5x9", "ok", 2)]
"""Model ``tiny`` (8 features) served 2x8 three times (and once it failed), 3x17 only on two failed requests, and
5x9, which the model cannot run (9 features), on two requests the host says succeeded."""

READ = re.compile(
    r"traffic shapes from http://\S+: 8 requests of model 'tiny' since \d{4}-\d\d-\d\d \d\d:\d\d UTC \(--since 1d\); "
    r"kept 2 shapes of 6 requests, weighted by request count; left out: 1 shape seen only on failed requests "
    r"\(raised; 2 requests\): 3x17 \(2 requests\)"
)
"""The one line saying where the shapes came from (which service, model and window, how many requests) and what was
left out: before it said only the shapes left out, and the build's `compiling 2 shapes` said nothing of the source."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A service whose store holds the recorded requests."""
    rows = [{"request_id": f"req-{shape}-{status}-{i}", "minutes_ago": 10 + i, "model": "tiny", "shape": shape,
             "status": status, "outcome": "error" if status == "error" else "hit",
             "error": "ValueError: bad request" if status == "error" else ""}
            for shape, status, n in TRAFFIC for i in range(n)]  # fmt: skip
    with traffic_service(tmp_path_factory.mktemp("traffic-service"), rows) as svc:
        yield svc


def _args(service: RunningService, keys: Keys, out: Path, *extra: str) -> list[str]:
    return ["bundle", "build", "--model", MODEL, "--inputs", INPUTS, "--key", str(keys.private), "--out", str(out),
            "--shapes-from-service", service.url, "--token", ADMIN, "--traffic-model", "tiny", "--since", "1d",
            "--name", "from-traffic", "--no-advise", *extra]  # fmt: skip


def test_an_unrunnable_traffic_shape_is_named_with_its_requests_before_compiling(
    service: RunningService, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build took 3x17 from two requests that had raised and, after compiling, failed with "the model cannot
    run shape [3, 17] ... fix the shapes file" though there was none. Now 3x17 is left out and counted, and 5x9
    (requests that succeeded, but the model cannot run it here) is refused before any compile, naming its
    requests and the flag that leaves it out."""
    import importlib

    build_module = importlib.import_module("inferensics.bundle.build")  # the package's `build` is the function

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled before the traffic shapes were checked")

    monkeypatch.setattr(build_module, "run_policy", no_compile)
    res = CliRunner().invoke(app, _args(service, keys, tmp_path / "refused"))
    assert res.exit_code != 0, res.output
    lines = res.output.strip().splitlines()
    assert "Traceback" not in res.output
    assert READ.fullmatch(lines[0]), lines[0]
    assert len(lines) == 2, lines
    error = lines[1]
    assert error.startswith("error: 1 traffic shape the model cannot run eagerly (checked before compiling): 5x9 (")
    assert "the model cannot run shape [5, 9]" in error
    assert "from 2 requests: req-5x9-ok-0, req-5x9-ok-1)" in error
    assert "pass --skip-unrunnable-shapes" in error
    assert "3x17" not in error
    assert not (tmp_path / "refused").exists()


def test_skip_unrunnable_shapes_builds_on_the_rest(service: RunningService, keys: Keys, tmp_path: Path) -> None:
    """The shapes left out were printed, and the signed report said nothing of them: a bundle built on part of
    its traffic read as qualified on all of it. They are recorded in the report (shape, reason, requests), which
    the signature covers, and ``bundle verify`` and ``bundle show`` say them."""
    out = tmp_path / "bundle"
    command = [sys.executable, "-m", "inferensics.cli", *_args(service, keys, out, "--skip-unrunnable-shapes")]
    res = subprocess.run(command, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert READ.search(res.stdout), res.stdout
    assert "left out traffic shape 5x9 (the model cannot run shape [5, 9]" in res.stdout, res.stdout
    assert "from 2 requests: req-5x9-ok-0, req-5x9-ok-1)" in res.stdout
    manifest = b.read_manifest(out)
    assert manifest.identity["accepted_shapes"]["shapes"] == [[2, 8]]
    report = json.loads((out / "report" / "qualification.json").read_text())
    assert [s["shape"] for s in report["shapes"]] == [[2, 8]]
    [left_out] = report["left_out_shapes"]
    assert left_out["shape"] == [5, 9]
    assert left_out["reason"].startswith("the model cannot run shape [5, 9] with "), left_out
    assert left_out["requests"] == "from 2 requests: req-5x9-ok-0, req-5x9-ok-1"
    said = "left out of qualification: shape 5x9 (the model cannot run shape [5, 9] with "
    markdown = (out / "report" / "qualification.md").read_text()
    assert "Left out of qualification: shape 5x9 (the model cannot run shape [5, 9] with " in markdown
    b.verify(out, keys.keyring)
    runner = CliRunner()
    verified = runner.invoke(app, ["bundle", "verify", str(out), "--keyring", str(keys.public)], env={"COLUMNS": "400"})
    assert verified.exit_code == 0, verified.output
    assert said in verified.output, verified.output
    assert "from 2 requests: req-5x9-ok-0, req-5x9-ok-1)" in verified.output
    shown = runner.invoke(app, ["bundle", "show", str(out)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert f"  {said}" in shown.output, shown.output
    # The signature covers the record: a report without it does not verify.
    del report["left_out_shapes"]
    (out / "report" / "qualification.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    with pytest.raises(b.BundleError, match=r"qualification\.json"):
        b.verify(out, keys.keyring)


def test_skip_unrunnable_shapes_goes_with_traffic_shapes(keys: Keys, tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(b.ShapeDistribution.of([(2, 8)], [1]).to_json()))
    args = ["bundle", "build", "--model", MODEL, "--key", str(keys.private), "--out", str(tmp_path / "o"),
            "--shapes", str(shapes), "--skip-unrunnable-shapes"]  # fmt: skip
    one_line_error(args, "it goes with --shapes-from-service")
