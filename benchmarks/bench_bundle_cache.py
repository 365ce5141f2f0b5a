"""What the bundle cache saves the demo: one release bundle built anew against the same build reused.

    .venv/bin/python benchmarks/bench_bundle_cache.py                  # 2 rounds, the baseline bundle
    .venv/bin/python benchmarks/bench_bundle_cache.py --rounds 4 --only candidate

Each side is the demo's own bundle step, ``python -m inferensics.demo.bundles --only NAME --cache DIR``, in
a fresh process (as ``inferensics demo`` runs it, one intra-op thread): ``rebuild`` passes ``--rebuild``
(compile, qualify, sign, store; the build compiles in a temporary Inductor cache, so every compile is
cold), ``reuse`` finds the bundle that ``rebuild`` just stored (build key, verification, copy). Rounds
alternate the order after the first (rebuild then reuse, then a reuse of the previous round's bundle
before the next rebuild) so load drifts reach both sides. Per round it prints both wall times and their
ratio; at the end the median ratio with its spread (min-max over rounds), whether both sides gave the same
bundle id, and the load average.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _side(name: str, cache: Path, out: Path, key: Path, *, rebuild: bool) -> tuple[float, dict[str, object]]:
    command = [sys.executable, "-m", "inferensics.demo.bundles", "--out", str(out), "--key", str(key), "--only", name,
               "--threads", "1", "--cache", str(cache), *(["--rebuild"] if rebuild else [])]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1800)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    status: dict[str, object] = json.loads((out / f"{name}.build.json").read_text())
    return wall, status


def main() -> None:
    """Run the rounds and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", default="baseline", choices=("baseline", "candidate"))
    args = p.parse_args()
    from inferensics import bundle

    with tempfile.TemporaryDirectory(prefix="bench-bundle-cache-") as tmp:
        root = Path(tmp)
        key = bundle.generate_key(root / "builder-key")[0]
        ratios: list[float] = []
        ids: set[object] = set()
        for r in range(args.rounds):
            walls: dict[bool, float] = {}
            for i, rebuild in enumerate((True, False) if r % 2 == 0 else (False, True)):
                wall, status = _side(args.only, root / "cache", root / f"out-{r}-{i}", key, rebuild=rebuild)
                if bool(status["reused"]) is rebuild:
                    raise SystemExit(f"round {r + 1}: expected {'a build' if rebuild else 'a reuse'}, got {status}")
                walls[rebuild] = wall
                ids.add(status["bundle_id"])
            ratio = walls[True] / walls[False]
            ratios.append(ratio)
            print(f"round {r + 1}: rebuild {walls[True]:6.1f} s  reuse {walls[False]:5.1f} s  ratio {ratio:5.1f}x",
                  flush=True)  # fmt: skip
    spread = f"min {min(ratios):.1f}x, max {max(ratios):.1f}x over {len(ratios)} rounds"
    print(f"{args.only}: rebuild/reuse median {statistics.median(ratios):.1f}x ({spread}); "
          f"one bundle id on both sides: {len(ids) == 1}")  # fmt: skip
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
