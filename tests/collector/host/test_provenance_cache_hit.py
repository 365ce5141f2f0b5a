"""Kernel source lines name the file this process compiled, also when its kernels come from a cache filled in
another checkout: Inductor's FX-graph and AOTAutograd cache keys do not cover source paths, so a hit replays
the provenance of the process that compiled first, and a release bundle carries its builder's."""

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


    def tiny():
        return Tiny()


    def inputs(shape):
        return (torch.ones(shape),)
    """
)
PROVENANCE = {"trace.provenance_tracking_level": 1}
SERVE = textwrap.dedent(
    """
    import json, sys, torch
    import tiny_model
    from inferensics.collector.host import SdkConfig, instrument
    from inferensics.collector.testing import InMemoryExporter
    from inferensics.schema import CompileEvent, KernelInventoryEvent

    how = sys.argv[1]
    exporter = InMemoryExporter()
    # "options": provenance asked for through the compile's options only, not the SDK's setting.
    config = SdkConfig.from_env(provenance_level=0 if how == "options" else 1)
    tracker = instrument(exporter=exporter, host="prov-test", model="tiny", config=config)
    if how == "bundle":
        compiled = tracker.compile(tiny_model.tiny(), bundle=sys.argv[2], keyring=sys.argv[3])
    else:
        compiled = tracker.compile(tiny_model.tiny(), options=PROVENANCE if how == "options" else None)
    with tracker.request("r1"):
        compiled(torch.ones(4, 8))
    tracker.shutdown()
    stats = tracker.stats()
    print(json.dumps({
        "stale": [stats["stale_source_lines"]],
        "bundle_hits": [stats.get("bundle_hit_graphs", 0)],
        "caches": sorted(tracker.pipeline.assembler.stats.cache),
        "cache": [r.cache_status for r in exporter.records if isinstance(r, CompileEvent)],
        "lines": [ref for r in exporter.records if isinstance(r, KernelInventoryEvent) for ref in r.source_lines],
    }))
    """
).replace("PROVENANCE", repr(PROVENANCE))
BUILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from inferensics import bundle as b

    out = Path(sys.argv[1])
    private, _, _ = b.generate_key(out / "builder")
    shapes = b.ShapeDistribution.of([(4, 8)], [1])
    spec = b.BuildSpec(model="tiny_model:tiny", inputs="tiny_model:inputs", shapes=shapes, options=PROVENANCE,
                       advise=False, repeats=1, name="tiny")
    b.build(spec, b.load_signing_key(private), out / "bundle")
    """
).replace("PROVENANCE", repr(PROVENANCE))


def _checkout(directory: Path) -> Path:
    """A checkout of the model: the same module file in its own folder."""
    directory.mkdir()
    (directory / "tiny_model.py").write_text(MODEL, encoding="utf-8")
    return directory


def _python(script: str, checkout: Path, cache: Path, *args: str) -> str:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(checkout)}
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _serve(checkout: Path, cache: Path, *args: str) -> dict[str, list[object]]:
    out: dict[str, list[object]] = json.loads(_python(SERVE, checkout, cache, *args).strip().splitlines()[-1])
    return out


def _expected(checkout: Path) -> list[str]:
    text = MODEL.splitlines()
    sum_at, sin_at = (next(i + 1 for i, ln in enumerate(text) if code in ln) for code in ("y.sum", "torch.sin"))
    # One fused kernel: the sum, then the sin and mul fused into it.
    return [f"{checkout / 'tiny_model.py'}:{n}" for n in (sum_at, sin_at)]


@pytest.mark.slow
def test_cache_hit_names_this_checkout(tmp_path: Path) -> None:
    cache = tmp_path / "inductor"
    first = _serve(_checkout(tmp_path / "first"), cache, "sdk")
    second = _serve(_checkout(tmp_path / "second"), cache, "sdk")
    # Provenance on through the compile's options (the SDK's own level 0): the same cache entry, so a hit.
    third = _serve(_checkout(tmp_path / "third"), cache, "options")
    assert (first["cache"], second["cache"], third["cache"]) == (["miss"], ["hit"], ["hit"])
    # The warm cache of another checkout answers through both caches: AOTAutograd's entry, then the FX graph's.
    assert second["caches"] == third["caches"] == ["aot_autograd_hit", "fx_graph_hit"]
    assert first["stale"] == second["stale"] == third["stale"] == [0]
    for run, checkout in ((first, "first"), (second, "second"), (third, "third")):
        assert run["lines"] == _expected(tmp_path / checkout)


@pytest.mark.slow
def test_bundle_built_elsewhere_names_the_serving_checkout(tmp_path: Path) -> None:
    """A bundle built (with provenance in its options) in one checkout and served through
    ``tracker.compile(..., bundle=...)`` from another: every kernel comes from the bundle, its source lines
    name the serving checkout's file."""
    built = tmp_path / "built"
    _python(BUILD, _checkout(tmp_path / "builder"), tmp_path / "build-cache", str(built))
    served = _serve(
        _checkout(tmp_path / "server"),
        tmp_path / "serve-cache",
        "bundle",
        str(built / "bundle"),
        str(built / "builder.pub"),
    )
    assert served["bundle_hits"] == [1]
    assert served["cache"] == ["hit"]
    assert served["stale"] == [0]
    assert served["lines"] == _expected(tmp_path / "server")
