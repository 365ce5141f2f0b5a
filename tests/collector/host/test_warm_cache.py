"""A warm FX-graph-cache hit in a second process: same model, shared TORCHINDUCTOR_CACHE_DIR, and the
second process's first request is a compile whose cache status is ``hit``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from inferensics.collector.host import instrument, NullExporter

    class Collect(NullExporter):
        def __init__(self):
            super().__init__()
            self.rows = []
        def export_request(self, request, children):
            kids = [type(c).__name__ + ":" + getattr(c, "result", "") for c in children]
            self.rows.append({**request.model_dump(mode="json"), "children": kids})

    def model(x):
        return torch.nn.functional.gelu(x @ x.T) * 0.5

    exporter = Collect()
    tracker = instrument(exporter=exporter, host="warm-test", model="warm")
    compiled = tracker.compile(model)
    for i in range(2):
        with tracker.request(f"{sys.argv[1]}-{i}", shape=(4, 4)) as req:
            req.set_output(compiled(torch.ones(4, 4)))
    tracker.shutdown()
    print(json.dumps(exporter.rows))
    """
)


def _run(tag: str, cache: Path) -> list[dict[str, object]]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, tag], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows: list[dict[str, object]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return rows


@pytest.mark.slow
def test_second_process_hits_fx_graph_cache(tmp_path: Path) -> None:
    cache = tmp_path / "inductor"
    cold = _run("cold", cache)
    warm = _run("warm", cache)
    assert [r["outcome"] for r in cold] == ["compile", "hit"]
    assert [r["outcome"] for r in warm] == ["compile", "hit"]
    assert cold[0]["cache_status"] == "miss"
    assert warm[0]["cache_status"] == "hit"
    assert "CacheEvent:hit" in warm[0]["children"]  # type: ignore[operator]
    assert warm[1]["cache_status"] == "none"
    # Stable identities: the same graph key and artifact in both processes.
    assert cold[0]["graph_keys"] == warm[0]["graph_keys"]
    assert cold[0]["graph_artifacts"] == warm[0]["graph_artifacts"]
