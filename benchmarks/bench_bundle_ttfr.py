"""Time to first served request of the demo decoder: a fresh process with the bundle against without.

    .venv/bin/python benchmarks/bench_bundle_ttfr.py                     # CPU, 3 rounds
    python benchmarks/bench_bundle_ttfr.py --device cuda --rounds 5      # on a GPU host (Triton)

Builds one bundle of ``TinyDecoder`` (``inferensics.demo.bundles:decoder``) over the shapes given, then
runs interleaved rounds of two fresh processes, each with an empty Inductor cache: ``cold`` compiles from
scratch, ``bundle`` verifies and loads the bundle first. Each child measures from its start (before
importing torch) to the first served request's output (synchronised on CUDA), then serves every qualified
shape and reports the bundle hits and misses and the FX-graph cache hits. Prints per-round figures, the
median ratio cold/bundle with its spread over rounds, and the load average; asserts nothing.
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

_T0 = time.perf_counter()

CHILD = "--child"


def _child(args: argparse.Namespace) -> None:
    import warnings

    warnings.simplefilter("ignore")
    import torch

    from inferensics import bundle as b
    from inferensics.demo.bundles import decoder, decoder_inputs

    t_import = time.perf_counter() - _T0
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    model = decoder().to(args.device).eval()
    session = None
    t_load = 0.0
    if args.child == "bundle":
        t = time.perf_counter()
        loaded = b.load(args.bundle, b.Keyring.load(args.keyring))
        t_load = time.perf_counter() - t
        session = loaded.session(on_bundle_miss="compile")
        compiled = loaded.compile(model, session)
    else:
        compiled = torch.compile(model, dynamic=False)

    def serve(shape: tuple[int, ...]) -> None:
        (tokens,) = decoder_inputs(shape)
        with torch.inference_mode():
            out = compiled(tokens.to(args.device))
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        assert out.shape[0] == shape[0]

    serve(shapes[0])
    ttfr = time.perf_counter() - _T0
    t = time.perf_counter()
    for s in shapes[1:]:
        serve(s)
    rest = time.perf_counter() - t
    counters = torch._dynamo.utils.counters["inductor"]
    print(json.dumps({
        "ttfr_s": ttfr, "import_s": t_import, "load_s": t_load, "other_shapes_s": rest,
        "bundle_hits": session.hits if session else 0, "bundle_misses": session.misses if session else 0,
        "fx_hits": counters["fxgraph_cache_hit"], "fx_misses": counters["fxgraph_cache_miss"],
        "miss_factors": [list(m.factors) for m in session.matches if m.status == "miss"] if session else [],
    }))  # fmt: skip


def _run_child(kind: str, args: argparse.Namespace, bundle: Path, keyring: Path) -> dict[str, float]:
    cache = tempfile.mkdtemp(prefix="ttfr-cache-")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "TRITON_CACHE_DIR": os.path.join(cache, "triton")}
    cmd = [sys.executable, __file__, CHILD, kind, "--device", args.device, "--shapes", args.shapes,
           "--bundle", str(bundle), "--keyring", str(keyring)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    """Parse arguments; build once, then interleave cold and bundle rounds."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shapes", default="1x16,2x32", help="batch x sequence, comma-separated")
    p.add_argument(CHILD, dest="child", choices=["cold", "bundle"])
    p.add_argument("--bundle", default="")
    p.add_argument("--keyring", default="")
    args = p.parse_args()
    if args.child:
        _child(args)
        return
    from inferensics import bundle as b

    work = Path(tempfile.mkdtemp(prefix="ttfr-"))
    priv, pub, _ = b.generate_key(work / "key")
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    t = time.perf_counter()
    spec = b.BuildSpec(model="inferensics.demo.bundles:decoder", inputs="inferensics.demo.bundles:decoder_inputs",
                       shapes=b.ShapeDistribution.of(shapes), device=args.device, advise=False, name="ttfr",
                       repeats=1)  # fmt: skip
    build_cache = tempfile.mkdtemp(prefix="ttfr-build-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = build_cache
    result = b.build(spec, b.load_signing_key(priv), work / "bundle")
    size = sum(r.size for r in result.manifest.resources)
    print(f"built {result.bundle_id[:16]} in {time.perf_counter() - t:.1f} s: {len(result.manifest.graphs)} graphs, "
          f"{size:,} bytes; device {args.device}; shapes {args.shapes}")  # fmt: skip
    ratios, cold_t, bundle_t = [], [], []
    for i in range(args.rounds):
        order = ["cold", "bundle"] if i % 2 == 0 else ["bundle", "cold"]
        got = {k: _run_child(k, args, result.directory, pub) for k in order}
        c, w = got["cold"], got["bundle"]
        cold_t.append(c["ttfr_s"])
        bundle_t.append(w["ttfr_s"])
        ratios.append(c["ttfr_s"] / w["ttfr_s"])
        print(f"round {i + 1} ({'/'.join(order)}): ttfr cold {c['ttfr_s']:.2f} s (import {c['import_s']:.2f}), "
              f"bundle {w['ttfr_s']:.2f} s (import {w['import_s']:.2f}, verify+load {w['load_s']:.2f}); "
              f"ratio {ratios[-1]:.2f}; bundle hits {w['bundle_hits']}/{len(result.manifest.graphs)}, "
              f"misses {w['bundle_misses']}, fx cache hits {w['fx_hits']} misses {w['fx_misses']}; "
              f"cold fx misses {c['fx_misses']}; load {os.getloadavg()[0]:.2f}")  # fmt: skip
        if w["miss_factors"]:
            print(f"  bundle misses: {w['miss_factors']}")
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "n/a"
    print(f"median ttfr: cold {statistics.median(cold_t):.2f} s, bundle {statistics.median(bundle_t):.2f} s; "
          f"cold/bundle median {statistics.median(ratios):.2f} (rounds {spread}, n={len(ratios)}); "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip


if __name__ == "__main__":
    main()
