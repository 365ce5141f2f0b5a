"""``inferensics bundle build --shapes-from-service``: the bundle is built and qualified on the shape
distribution real traffic had, read from a real service (embedded chDB store) holding recorded requests,
traffic-weighted, within ``--since`` and for the named model only."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferensics import bundle as b
from tests.bundle.conftest import INPUTS, MODEL, Keys
from tests.bundle.traffic import ROOT, clean_env, traffic_service
from tests.collector.service.harness import ADMIN, RunningService

pytestmark = pytest.mark.slow

TRAFFIC = [("tiny", "2x8", 6, 1), ("tiny", "4x8", 2, 1), ("tiny", "2x8x3", 1, 1), ("tiny", "5x8", 9, 72),
           ("other", "7x8", 9, 1)]  # fmt: skip
"""Recorded traffic (model, shape, requests, hours ago): model ``tiny`` served 2x8 six times and 4x8 twice in the
last day, one request of another rank (2x8x3), and 5x8 nine times three days ago; model ``other`` served 7x8."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A service whose store holds the recorded requests."""
    rows = [{"request_id": f"{model}-{shape}-{i}", "minutes_ago": hours * 60 + i, "model": model, "shape": shape}
            for model, shape, n, hours in TRAFFIC for i in range(n)]  # fmt: skip
    with traffic_service(tmp_path_factory.mktemp("shapes-service"), rows) as svc:
        yield svc


def _build(service: RunningService, keys: Keys, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # The traffic is read through the service's SQL endpoint, which takes an admin token (as push and promote do).
    env = clean_env()
    command = [sys.executable, "-m", "inferensics.cli", "bundle", "build", "--model", MODEL, "--inputs", INPUTS,
               "--key", str(keys.private), "--out", str(out), "--shapes-from-service", service.url,
               "--token", ADMIN, "--name", "from-traffic", "--no-advise", *extra]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_build_takes_the_traffic_weighted_shapes_of_the_window(
    service: RunningService, keys: Keys, tmp_path: Path
) -> None:
    out = tmp_path / "bundle"
    res = _build(service, keys, out, "--traffic-model", "tiny", "--since", "1d")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    # Where the shapes came from, in one line, and what was left out: the request of another rank is named and
    # counted, not dropped silently (the 5x8 requests are older than the window, 7x8 is another model's).
    assert re.search(
        r"^traffic shapes from http://\S+: 9 requests of model 'tiny' since \S+ \S+ UTC \(--since 1d\); "
        r"kept 2 shapes of 8 requests, weighted by request count; "
        r"left out: 1 request whose shape is not 2 positive sizes \(AxB\.\.\.\): 2x8x3$",
        res.stdout,
        re.MULTILINE,
    ), res.stdout
    manifest = b.read_manifest(out)
    assert manifest.identity["accepted_shapes"]["shapes"] == [[2, 8], [4, 8]]  # 5x8 is older than 1d; 7x8 is other
    report = json.loads((out / "report" / "qualification.json").read_text())
    shares = {tuple(s["shape"]): s["share"] for s in report["shapes"]}
    assert shares == pytest.approx({(2, 8): 0.75, (4, 8): 0.25})
    b.verify(out, keys.keyring)


def test_no_traffic_for_the_model_is_one_line(service: RunningService, keys: Keys, tmp_path: Path) -> None:
    res = _build(service, keys, tmp_path / "none", "--traffic-model", "nobody", "--since", "7d")
    assert res.returncode != 0
    lines = (res.stdout + res.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error:")
    assert "nobody" in lines[0]
    assert "--shapes FILE" in lines[0]
    assert not (tmp_path / "none").exists()
