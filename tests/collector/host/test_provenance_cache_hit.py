"""Kernel source lines name the file this process compiled, also on an FX-graph-cache hit: Inductor's cache
key does not cover source paths, so a hit replays the provenance of the process that compiled first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MODEL = textwrap.dedent(
    """
    import torch


    class Tiny(torch.nn.Module):
        def forward(self, x):
            y = torch.sin(x) * 2
            return y.sum(dim=-1)
    """
)
SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, sys, torch
    from inferensics.collector.host import instrument
    from inferensics.collector.testing import InMemoryExporter
    from inferensics.schema import CompileEvent, KernelInventoryEvent

    spec = importlib.util.spec_from_file_location("tiny_model", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    exporter = InMemoryExporter()
    tracker = instrument(exporter=exporter, host="prov-test", model="tiny")
    compiled = tracker.compile(module.Tiny())
    with tracker.request("r1"):
        compiled(torch.ones(4, 8))
    tracker.shutdown()
    print(json.dumps({
        "stale": [tracker.stats()["stale_source_lines"]],
        "cache": [r.cache_status for r in exporter.records if isinstance(r, CompileEvent)],
        "lines": [ref for r in exporter.records if isinstance(r, KernelInventoryEvent) for ref in r.source_lines],
    }))
    """
)


def _run(model_dir: Path, cache: Path) -> dict[str, list[object]]:
    model_dir.mkdir()
    (model_dir / "tiny.py").write_text(MODEL, encoding="utf-8")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(model_dir / "tiny.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, list[object]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.slow
def test_cache_hit_names_this_checkout(tmp_path: Path) -> None:
    cache = tmp_path / "inductor"
    first = _run(tmp_path / "first", cache)
    second = _run(tmp_path / "second", cache)
    assert (first["cache"], second["cache"]) == (["miss"], ["hit"])
    assert first["stale"] == second["stale"] == [0]
    text = MODEL.splitlines()
    sum_at, sin_at = (next(i + 1 for i, ln in enumerate(text) if code in ln) for code in ("y.sum", "torch.sin"))
    # One fused kernel: the sum, then the sin and mul fused into it.
    assert first["lines"] == [f"{tmp_path / 'first' / 'tiny.py'}:{n}" for n in (sum_at, sin_at)]
    assert second["lines"] == [f"{tmp_path / 'second' / 'tiny.py'}:{n}" for n in (sum_at, sin_at)]
