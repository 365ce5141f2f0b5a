"""The README's "Instrumenting your own serving process" walked as a new user would: its code blocks, run
as written (only the port is changed to a free one), against a real service, a real compile and a real
store. A README that drifts from the product fails here."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.polling import poll

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "### Instrumenting your own serving process"
BLOCK = re.compile(r"^( *)```(\w+)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n### ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    return [(m.group(2), textwrap.dedent(m.group(3))) for m in BLOCK.finditer(section)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_section_has_the_steps() -> None:
    kinds = [kind for kind, _ in _blocks()]
    assert kinds == ["bash", "python", "bash", "bash", "python", "python", "bash", "python", "bash"], kinds


@pytest.mark.slow
def test_readme_from_nothing_to_rows(tmp_path: Path) -> None:
    port = str(_free_port())
    serve, script, run, query, client, model, build, bundled, replay = (c.replace("4318", port) for _, c in _blocks())
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env.update(
        INFERENSICS_DATA_DIR=str(tmp_path / "store"),  # the README's default store, moved out of $HOME
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # `inferensics`, `python`
        PYTHONWARNINGS="ignore",
    )

    def sh(code: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-ec", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )

    log = (tmp_path / "service.log").open("wb")
    service = subprocess.Popen(
        ["bash", "-ec", serve], cwd=tmp_path, env=env, stdout=log, stderr=log, start_new_session=True
    )
    try:

        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return service.poll() is not None

        poll(ready, bool, timeout=120, interval=0.2)
        assert service.poll() is None, (tmp_path / "service.log").read_text()
        assert ready(), (tmp_path / "service.log").read_text()

        (tmp_path / "serve.py").write_text(script, encoding="utf-8")
        served = sh(run)
        assert served.returncode == 0, served.stderr[-3000:]
        assert "'export_refused_auth': 0" in served.stdout
        assert "'export_spans_sent': 0" not in served.stdout, served.stdout  # flushed before the stats print

        rows = poll(lambda: sh(query, timeout=60), lambda p: "req-2" in p.stdout, timeout=60, interval=0.5)
        assert rows.returncode == 0, rows.stderr[-3000:]
        assert all(f"req-{i}" in rows.stdout for i in range(3)), rows.stdout

        (tmp_path / "client.py").write_text(client, encoding="utf-8")
        frame = sh("python client.py", timeout=60)
        assert frame.returncode == 0, frame.stderr[-3000:]
        assert "shape: (3, 4)" in frame.stdout, frame.stdout
        assert frame.stdout.count("llama") == 3, frame.stdout
        assert "compile" in frame.stdout, frame.stdout
        assert "hit" in frame.stdout, frame.stdout

        # Step 4: a bundle built from the user's own module, served from, and a failing request replayed.
        (tmp_path / "model.py").write_text(model, encoding="utf-8")
        (tmp_path / "serve_bundle.py").write_text(bundled, encoding="utf-8")
        built = sh(build)
        assert built.returncode == 0, built.stdout + built.stderr[-3000:]
        assert (tmp_path / "bundles" / "llama" / "manifest.json").is_file()
        replayed = sh(replay)
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr[-3000:]
        assert "bundled-1 failed: TorchRuntimeError" in replayed.stdout
        assert "bundled-0 failed" not in replayed.stdout
        assert "verdict: inputs" in replayed.stdout, replayed.stdout
        assert "but got torch.FloatTensor" in replayed.stdout, replayed.stdout
        assert "recorded in replay_results" in replayed.stdout, replayed.stdout
        sql = (
            "SELECT request_id, outcome, bundle_id = '' AS unbundled FROM inferensics.requests "
            "WHERE request_id LIKE 'bundled-%' ORDER BY request_id"
        )
        (tmp_path / "bundled_rows.py").write_text(client.replace(
            'client.sql("SELECT request_id, model, outcome, cache_status FROM inferensics.requests ORDER BY ts")',
            f'client.sql("{sql}").rows()',
        ), encoding="utf-8")  # fmt: skip
        rows = sh("python bundled_rows.py", timeout=60)
        assert rows.returncode == 0, rows.stderr[-3000:]
        assert "('bundled-0', 'compile', 0)" in rows.stdout, rows.stdout  # served from the bundle
        assert "('bundled-1', 'error', 0)" in rows.stdout, rows.stdout
    finally:
        os.killpg(service.pid, signal.SIGTERM)
        try:
            service.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(service.pid, signal.SIGKILL)
            service.wait(30)
        log.close()
