"""Session 15 (gpu4), issue 25 point 10: where a compiled call's in-request cost goes in the default mode.

The study's decode model (default mode, bf16) compiled three times through Inductor with three wrappers
around the same compiled graph: ``instr`` (the SDK's ``_counting``), ``noclock`` (counts calls, reads no
clock), ``ignore`` (reads the context variable, then calls: the outside-a-request path even inside one).
Bursts of 64 calls (host time per call, device synchronised outside the timing), variants in a fresh
random order per burst, each artifact outside and inside a tracker request, and ``instr`` inside a request
with the guard hook taken out. Prints per variant the median µs per call and the paired in-minus-out
differences. Run: ``PYTHONPATH=tree:tree/benchmarks python3 diag_percall.py --bursts 60``.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import time
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bursts", type=int, default=60)
    ap.add_argument("--calls", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--hidden", type=int, default=4096)
    args = ap.parse_args()
    import torch
    from bench_sdk_overhead import decode_model

    from inferensics.collector.host import NullExporter, SdkConfig, instrument, torch_adapter
    from inferensics.collector.host.backend import _counting
    from inferensics.collector.host.records import CURRENT, GraphSlot

    get = CURRENT.get

    def noclock(compiled: Any, slot: GraphSlot) -> Any:
        def run(*a: Any) -> Any:
            request = get()
            if request is not None:
                entry = request.graphs.get(slot)
                if entry is None:
                    request.graphs[slot] = [1, 0]
                else:
                    entry[0] += 1
            return compiled(*a)

        return run

    def ignore(compiled: Any, slot: GraphSlot) -> Any:
        def run(*a: Any) -> Any:
            get()
            return compiled(*a)

        return run

    cuda = args.device == "cuda"
    ns = argparse.Namespace(
        device=args.device,
        hidden=args.hidden,
        layers=4,
        tokens=8,
        dtype="bfloat16" if cuda else "float32",
        vocab=32000 if cuda else 1000,
    )

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    base, x = decode_model(ns)
    fns: dict[str, Any] = {}
    with torch.no_grad():
        for i, (name, wrap) in enumerate((("instr", _counting), ("noclock", noclock), ("ignore", ignore))):

            def backend(gm: Any, ex: list[Any], wrap: Any = wrap, i: int = i) -> Any:
                return wrap(torch_adapter.compile_fx(gm, ex, {}), GraphSlot(i, ""))

            fn = torch.compile(copy.deepcopy(base), backend=backend)
            for _ in range(3):
                fn(x)
            fns[name] = fn
        sync()
        tracker = instrument(exporter=NullExporter(), host="d", model="d", config=SdkConfig())
        hook = torch_adapter.set_guard_hook(None)
        torch_adapter.set_guard_hook(hook)
        variants = [f"{a}_{w}" for a in fns for w in ("out", "in")] + ["instr_in_nohook"]
        per: dict[str, list[float]] = {v: [] for v in variants}
        rng = random.Random(args.seed)
        for _ in range(args.bursts):
            for v in rng.sample(variants, len(variants)):
                art, where = v.split("_", 1)
                fn = fns[art]
                scope = tracker.request("p") if where != "out" else None
                if scope is not None:
                    scope.__enter__()
                if where == "in_nohook":
                    torch_adapter.set_guard_hook(None)
                sync()
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    fn(x)
                per[v].append((time.perf_counter() - t0) / args.calls * 1e6)
                if where == "in_nohook":
                    torch_adapter.set_guard_hook(hook)
                if scope is not None:
                    scope.__exit__(None, None, None)
            tracker.flush()
        tracker.shutdown()
    for v in variants:
        print(f"{v:16s} median {statistics.median(per[v]):8.2f} us/call")
    n = args.bursts
    for a, b in (
        ("instr_in", "instr_out"),
        ("noclock_in", "noclock_out"),
        ("ignore_in", "ignore_out"),
        ("instr_in_nohook", "instr_out"),
        ("instr_out", "ignore_out"),
        ("instr_in", "noclock_in"),
    ):
        d = [per[a][i] - per[b][i] for i in range(n)]
        q = statistics.quantiles(d, n=4)
        print(
            f"{a} - {b}: median {statistics.median(d):+.2f} us/call (IQR {q[0]:+.2f}..{q[2]:+.2f}, {n} paired bursts)"
        )


if __name__ == "__main__":
    main()
