"""``pip install <checkout>`` with no extras, in a fresh virtualenv: what a bare GPU serving host gets.

The virtualenv is made once for this module: the CPU torch wheel first (as ``make setup`` does, so nothing
pulls a CUDA build), then this checkout, with pip's cache reusing the wheels already downloaded. In it the
test checks the installed set (none of the service's, the dashboard's or the demo's packages), runs the
host SDK end to end (a compiled model, requests exported over OTLP/HTTP to a collector service that runs
from this test's own environment) and runs every CLI command, which must each name their missing extra.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_extras import BASE_COMMANDS, COMMANDS
from tests.collector.service.harness import INGEST, RunningService, new_service
from tests.polling import poll

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("schema", "collector", "analytics", "dashboard", "bundle", "replay", "kernels", "demo", "cli")
TORCH = "torch==2.13.0"
NOT_ON_A_SERVING_HOST = frozenset({
    "chdb", "chdb-core", "clickhouse-connect", "polars", "polars-runtime-32", "pyarrow", "streamlit", "altair",
    "starlette", "uvicorn", "httpx", "vl-convert-python", "transformers",
})  # fmt: skip
HOST_SDK_NEEDS = frozenset({"torch", "pydantic", "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"})

SDK_SCRIPT = """
import json, sys
import torch
from inferensics.collector.host import instrument

url, token = sys.argv[1], sys.argv[2]
tracker = instrument(service_url=url, token=token, host="slim-host", hw_pool="cpu-slim", model="slim")
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
compiled = tracker.compile(model)
for i in range(3):
    with tracker.request(f"slim-{i}", traffic_class="interactive", shape=(2, 8)) as req:
        req.set_output(compiled(torch.randn(2, 8)))
tracker.flush()
stats = tracker.stats()
tracker.shutdown()
extras = ("chdb", "clickhouse_connect", "polars", "pyarrow", "streamlit", "starlette", "uvicorn", "httpx")
print(json.dumps({"stats": stats, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in extras)}))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INFERENSICS_", "VIRTUAL_ENV", "PYTHON"))}
    return {**env, **extra}


def _run(
    args: list[str], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def slim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fresh virtualenv's bin directory, with the CPU torch wheel and this checkout (no extras)."""
    root = tmp_path_factory.mktemp("slim")
    src = root / "src"  # a copy: pip builds in the source tree, and this one must stay clean
    for part in PARTS:
        shutil.copytree(ROOT / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    assert made.returncode == 0, made.stderr
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    for what in ([TORCH], [str(src)]):
        done = _run([*pip, *what], timeout=1200, env=_env())
        assert done.returncode == 0, f"pip install {what}: {done.stderr[-3000:]}"
    return venv / "bin"


def test_installed_set_is_the_host_sdks(slim: Path) -> None:
    listed = _run([str(slim / "python"), "-m", "pip", "list", "--format=json"], timeout=120, env=_env())
    assert listed.returncode == 0, listed.stderr
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert installed & NOT_ON_A_SERVING_HOST == set()
    assert installed >= HOST_SDK_NEEDS | {"inferensics"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """A collector service from this test's environment (the service extra is installed here)."""
    with new_service(tmp_path_factory.mktemp("slim-service")) as svc:
        yield svc


def test_host_sdk_exports_a_compiled_model_to_the_service(slim: Path, service: RunningService, tmp_path: Path) -> None:
    env = _env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    ran = _run([str(slim / "python"), "-c", SDK_SCRIPT, service.url, INGEST], timeout=600, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    assert report["stats"]["requests"] == 3
    assert report["stats"]["dropped"] == 0
    client = service.client()
    sql = "SELECT count() FROM inferensics.requests WHERE model = 'slim' AND host = 'slim-host'"
    assert poll(lambda: int(client.sql(sql)[0, 0]), lambda n: n >= 3, timeout=120, interval=0.2) == 3
    rows = client.sql(
        "SELECT request_id, hw_pool, outcome FROM inferensics.requests WHERE model = 'slim' ORDER BY request_id"
    )
    assert rows["request_id"].to_list() == ["slim-0", "slim-1", "slim-2"]
    assert set(rows["hw_pool"]) == {"cpu-slim"}
    assert rows["outcome"].to_list()[0] == "compile"
    compiles = "SELECT count() FROM inferensics.compiles WHERE model = 'slim'"
    assert poll(lambda: int(client.sql(compiles)[0, 0]), lambda n: n >= 1, timeout=60, interval=0.2) >= 1


def test_every_command_names_its_missing_extra(slim: Path, tmp_path: Path) -> None:
    src = slim.parents[1] / "src"  # the checkout the fixture installed
    helped = _run([str(slim / "inferensics"), "--help"], timeout=120, env=_env(), cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    for name in sorted(BASE_COMMANDS):  # commands of the slim install itself: they start there
        res = _run([str(slim / "inferensics"), *name.split(), "--help"], timeout=120, env=_env(), cwd=tmp_path)
        assert res.returncode == 0, (name, res.stdout, res.stderr)
    for name, (args, extra) in sorted(COMMANDS.items()):
        res = _run([str(slim / "inferensics"), *args], timeout=120, env=_env(COLUMNS="300"), cwd=tmp_path)
        assert res.returncode == 2, (name, res.stdout, res.stderr)
        assert res.stdout == "", (name, res.stdout)
        lines = res.stderr.splitlines()
        assert len(lines) == 1, (name, res.stderr)
        hint = re.escape(f"pip install '{src}[{extra}]'")  # what this venv was installed from, not PyPI
        assert re.fullmatch(
            rf"error: `inferensics {name}` needs the {extra} extra \(.+ not installed\): {hint}", lines[0]
        )
