"""Session 16 (gpu5), issue 25 point 10: where a compiled call's in-request cost and a request's tail go.

``--part percall``: the study's decode model compiled once per wrapper (plain torch.compile; the SDK's
``_counting``, which counts into the request object's own slots; ``dict``, session 15's ``_counting``
that counted into ``request.graphs``; ``noclock``, slot counting without clocks; ``ignore``, the context
variable read only). Bursts of 64 calls (host clock, device synchronised outside the timing), every
variant once per burst set in a fresh random order; each artifact outside and inside a tracker request,
``_counting`` also inside a request with the guard hook taken out. Prints medians and paired
in-minus-out differences per artifact (same machine code on both sides of each difference).

``--part tail``: 64-call requests through the tracker, with and without the fingerprint, interleaved;
per request the serving-thread us of: ``tracker.request()``, ``__enter__``, the calls, ``set_output``,
``__exit__``, ``flush()`` and the device synchronisation after it; then the background-side pieces of a
fingerprint (``result()``: the buffer's snapshot and the fold) on a completed kernel.

Run: ``PYTHONPATH=tree:tree/benchmarks python3 diag_s16.py --part percall --mode default``.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import time
from typing import Any


def _model(cuda: bool, hidden: int) -> tuple[Any, Any]:
    from bench_sdk_overhead import decode_model

    ns = argparse.Namespace(
        device="cuda" if cuda else "cpu",
        hidden=hidden,
        layers=4,
        tokens=8,
        dtype="bfloat16" if cuda else "float32",
        vocab=32000 if cuda else 1000,
    )
    return decode_model(ns)


def percall(args: argparse.Namespace, out: dict[str, Any]) -> None:
    import torch

    from inferensics.collector.host import NullExporter, SdkConfig, instrument, torch_adapter
    from inferensics.collector.host.backend import _counting
    from inferensics.collector.host.records import CURRENT, GraphSlot

    get = CURRENT.get
    clock = time.perf_counter_ns

    def dictwrap(compiled: Any, slot: GraphSlot) -> Any:  # session 15's _counting
        def run(*a: Any) -> Any:
            request = get()
            if request is None:
                return compiled(*a)
            t0 = clock()
            o = compiled(*a)
            ns = clock() - t0
            entry = request.graphs.get(slot)
            if entry is None:
                request.graphs[slot] = [1, ns]
            else:
                entry[0] += 1
                entry[1] += ns
            return o

        return run

    def noclock(compiled: Any, slot: GraphSlot) -> Any:
        def run(*a: Any) -> Any:
            request = get()
            if request is None:
                return compiled(*a)
            o = compiled(*a)
            if request.graph0 is slot:
                request.graph0_calls += 1
            else:
                request.count_call(slot)  # session 17: RawRequest.note_graph became count_call + add_ns
            return o

        return run

    def ignore(compiled: Any, slot: GraphSlot) -> Any:
        def run(*a: Any) -> Any:
            get()
            return compiled(*a)

        return run

    cuda = args.device == "cuda"
    mode = None if args.mode == "default" else args.mode
    patches = torch_adapter.mode_options(mode)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    base, x = _model(cuda, args.hidden)
    fns: dict[str, Any] = {}
    wraps = (("instr", _counting), ("dict", dictwrap), ("noclock", noclock), ("ignore", ignore))
    names = ["plain", *[w for w, _ in wraps]]
    rng = random.Random(args.seed)
    with torch.no_grad():
        for name in rng.sample(names, len(names)):
            if name == "plain":
                fn = torch.compile(copy.deepcopy(base), mode=mode)
            else:
                wrap = dict(wraps)[name]
                i = names.index(name)

                def backend(gm: Any, ex: list[Any], wrap: Any = wrap, i: int = i) -> Any:
                    return wrap(torch_adapter.compile_fx(gm, ex, patches), GraphSlot(i, ""))

                fn = torch.compile(copy.deepcopy(base), backend=backend)
            for _ in range(3):
                fn(x)
            fns[name] = fn
        sync()
        tracker = instrument(exporter=NullExporter(), host="d", model="d", config=SdkConfig())
        hook = torch_adapter.set_guard_hook(None)
        torch_adapter.set_guard_hook(hook)
        variants = ["plain_out"] + [f"{a}_{w}" for a, _ in wraps for w in ("out", "in")] + ["instr_innohook"]
        per: dict[str, list[float]] = {v: [] for v in variants}
        for b in range(args.bursts + 2):
            for v in rng.sample(variants, len(variants)):
                art, where = v.split("_", 1)
                fn = fns[art]
                scope = tracker.request("p") if where != "out" else None
                if scope is not None:
                    scope.__enter__()
                if where == "innohook":
                    torch_adapter.set_guard_hook(None)
                sync()
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    fn(x)
                t = (time.perf_counter() - t0) / args.calls * 1e6
                if b >= 2:  # two warm-up sets
                    per[v].append(t)
                if where == "innohook":
                    torch_adapter.set_guard_hook(hook)
                if scope is not None:
                    scope.__exit__(None, None, None)
            tracker.flush()
        sync()
        tracker.shutdown()
    print(f"percall, mode {args.mode}, {args.bursts} burst sets of {args.calls} calls")
    for v in variants:
        print(f"  {v:16s} median {statistics.median(per[v]):8.2f} us/call")
    n = args.bursts
    diffs = {}
    for a, b in (
        ("instr_in", "instr_out"),
        ("dict_in", "dict_out"),
        ("noclock_in", "noclock_out"),
        ("ignore_in", "ignore_out"),
        ("instr_innohook", "instr_out"),
        ("instr_in", "instr_innohook"),
        ("instr_out", "plain_out"),
        ("instr_in", "plain_out"),
        ("ignore_out", "plain_out"),
    ):
        d = [per[a][i] - per[b][i] for i in range(n)]
        q = statistics.quantiles(d, n=4)
        diffs[f"{a}-{b}"] = [statistics.median(d), q[0], q[2]]
        med = statistics.median(d)
        print(f"  {a} - {b}: median {med:+.2f} us/call (IQR {q[0]:+.2f}..{q[2]:+.2f}, {n} paired bursts)")
    out["percall"] = {"mode": args.mode, "per": {v: [round(u, 3) for u in t] for v, t in per.items()}, "diffs": diffs}


def tail(args: argparse.Namespace, out: dict[str, Any]) -> None:
    import torch

    from inferensics.collector.host import NullExporter, SdkConfig, instrument
    from inferensics.collector.host import fingerprint as fpmod

    cuda = args.device == "cuda"
    mode = None if args.mode == "default" else args.mode

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    base, x = _model(cuda, args.hidden)
    with torch.no_grad():
        fn = torch.compile(copy.deepcopy(base), mode=mode)
        tracker = instrument(exporter=NullExporter(), host="d", model="d", config=SdkConfig())
        from inferensics.collector.host import InductorBackend

        fn = torch.compile(copy.deepcopy(base), backend=InductorBackend(mode=mode))
        for _ in range(3):
            y = fn(x)
        sync()
        if cuda:
            y0 = y.clone()
            t0 = time.perf_counter()
            fpmod.start_fingerprint(y0).result()
            while y0.dtype not in fpmod.KERNELS.ready and not fpmod.KERNELS.failed and time.perf_counter() - t0 < 120:
                time.sleep(0.05)
        clock = time.perf_counter_ns
        parts = ("request", "enter", "calls", "set_output", "exit", "flush", "sync")
        rec: dict[str, dict[str, list[float]]] = {v: {p: [] for p in parts} for v in ("nofp", "fp")}
        rng = random.Random(args.seed)
        shape = tuple(x.shape)
        for i in range(args.reqs + 3):
            for v in rng.sample(["nofp", "fp"], 2):
                sync()
                t = [clock()]
                scope = tracker.request(f"r{i}{v}", shape=shape)
                t.append(clock())
                scope.__enter__()
                t.append(clock())
                for _ in range(args.calls):
                    y = fn(x)
                t.append(clock())
                if v == "fp":
                    scope.set_output(y)
                t.append(clock())
                scope.__exit__(None, None, None)
                t.append(clock())
                tracker.flush()
                t.append(clock())
                sync()
                t.append(clock())
                if i >= 3:
                    for p, a, b in zip(parts, t[:-1], t[1:], strict=True):
                        rec[v][p].append((b - a) / 1e3)
        # the fingerprint's own pieces, its kernel completed
        launch, snap, fold, total = [], [], [], []
        for _ in range(args.reqs):
            t0 = clock()
            p = fpmod.start_fingerprint(y)
            t1 = clock()
            sync()
            t2 = clock()
            p._take_snapshot()
            t3 = clock()
            p.result()
            t4 = clock()
            launch.append((t1 - t0) / 1e3)
            snap.append((t3 - t2) / 1e3)
            fold.append((t4 - t3) / 1e3)
            q = fpmod.start_fingerprint(y)
            sync()
            t5 = clock()
            q.result()
            total.append((clock() - t5) / 1e3)
        tracker.shutdown()
    print(f"tail, mode {args.mode}, {args.reqs} requests of {args.calls} calls per variant (us, median [IQR])")
    for v in rec:
        cells = []
        for p in parts:
            q = statistics.quantiles(rec[v][p], n=4)
            cells.append(f"{p} {statistics.median(rec[v][p]):.1f} [{q[0]:.0f}..{q[2]:.0f}]")
        print(f"  {v:5s} " + "; ".join(cells))
    for name, vals in (
        ("start_fingerprint", launch),
        ("snapshot", snap),
        ("fold (result after snapshot)", fold),
        ("result() whole", total),
    ):
        print(f"  fingerprint {name}: median {statistics.median(vals):.1f} us (min {min(vals):.1f})")
    out["tail"] = {"mode": args.mode, "rec": rec, "fp": {"launch": launch, "snap": snap, "fold": fold, "total": total}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("percall", "tail"), required=True)
    ap.add_argument("--mode", default="default", choices=("default", "reduce-overhead"))
    ap.add_argument("--bursts", type=int, default=60)
    ap.add_argument("--reqs", type=int, default=40)
    ap.add_argument("--calls", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--jsonl", default="")
    args = ap.parse_args()
    out: dict[str, Any] = {"part": args.part, "mode": args.mode}
    (percall if args.part == "percall" else tail)(args, out)
    if args.jsonl:
        with open(args.jsonl, "a") as fh:
            fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
