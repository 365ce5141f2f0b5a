"""Session 15 (gpu4), issue 25 point 10: where the default mode's throughput cost goes on the H200.

Two parts, one process each call:

``--part micro`` (no device): the per-call and per-request Python of the SDK on this host's CPU, timed in
loops (median of repeats, the empty loop subtracted): the ``_counting`` wrapper outside and inside a request,
the guard hook, an empty request scope (enter, exit, queue put), and the background thread's record building
per request (``Pipeline.drain`` on the caller's thread, over requests queued by empty scopes).

``--part blocks`` (device): the study's decode model (4 x Linear(4096)+GELU, LM head 32000, 8 rows, bf16),
plain and instrumented artifacts, then sweeps of blocks (one block per variant per sweep, fresh random
order, ``--block-reqs`` requests of 64 calls back to back, the tracker's flush and a device synchronisation
inside the block's time), variants on the instrumented artifact unless named plain:

- ``plain``: the plain artifact; ``bare``: instrumented artifact, no request;
- ``nofp``: in requests, no fingerprint, the background thread as shipped;
- ``nofp_lazy``: the same with the background thread kept from draining (all record building in the flush,
  on the serving thread: no GIL hand-over during the block); a thread that wakes during the block waits on an
  event until the block is timed (the session-15 run predates this: its thread spun instead, in 9 of 32
  blocks, see the results README);
- ``nofp_y20``: the background thread hands the GIL over every 20 us of work instead of 100 us;
- ``instr``: in requests with the fingerprint;
- ``scope``: an empty request scope, then the 64 calls outside it (the scope's and record's cost alone).

Per block: wall, serving-thread CPU, other threads' CPU, the CPU the serving thread ended on. Printed per
process: per variant the median ratio to ``bare`` over sweeps (paired), and the serving thread's off-CPU us
per request (wall minus its CPU: GIL waits, device waits); the plain blocks' spread (max/min, and the share
of blocks 20 % over the process's fastest: the host's slow launch states). ``--pin`` pins the process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from functools import partial
from typing import Any


def _cpu_now() -> int:
    """The CPU the calling thread last ran on (-1 if unreadable)."""
    try:
        with open("/proc/thread-self/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def _med_loop(fn: Any, n: int, reps: int = 7) -> float:
    """Median over ``reps`` of µs per iteration of ``fn`` run ``n`` times."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn(n)
        out.append((time.perf_counter_ns() - t0) / n / 1e3)
    return statistics.median(out)


def micro() -> dict[str, float]:
    from inferensics.collector.host import NullExporter, SdkConfig, instrument
    from inferensics.collector.host.backend import _counting
    from inferensics.collector.host.records import CURRENT, GraphSlot
    from inferensics.collector.host.request_tracker import _guard_hook

    def noop(*a: Any) -> None:
        return None

    wrapped = _counting(noop, GraphSlot(0, ""))
    tracker = instrument(exporter=NullExporter(), host="d", model="d", config=SdkConfig(flush_interval_s=1e6))

    def loop_noop(n: int) -> None:
        x = 1
        for _ in range(n):
            noop(x)

    def loop_wrapped(n: int) -> None:
        x = 1
        for _ in range(n):
            wrapped(x)

    def loop_hook(n: int) -> None:
        for _ in range(n):
            _guard_hook(True)

    def loop_empty(n: int) -> None:
        for _ in range(n):
            pass

    out: dict[str, float] = {}
    base = _med_loop(loop_noop, 200_000)
    out["wrapper_out_us"] = _med_loop(loop_wrapped, 200_000) - base
    out["hook_out_us"] = _med_loop(loop_hook, 200_000) - _med_loop(loop_empty, 200_000)
    with tracker.request("m", shape=(8, 4096)):
        out["wrapper_in_us"] = _med_loop(loop_wrapped, 200_000) - base
        out["hook_in_us"] = _med_loop(loop_hook, 200_000) - _med_loop(loop_empty, 200_000)
    tracker.flush()
    ids = iter(range(10**9))

    def scopes(n: int) -> None:
        for _ in range(n):
            with tracker.request(f"r{next(ids)}", shape=(8, 4096)):
                wrapped(1)

    out["scope_us"] = _med_loop(scopes, 2000) - out["wrapper_in_us"]
    tracker.flush()
    # record building per request, on this thread (the background thread's work): queue n, then drain
    builds = []
    for _ in range(7):
        scopes(500)
        t0 = time.perf_counter_ns()
        tracker.pipeline.drain(block=True)
        builds.append((time.perf_counter_ns() - t0) / 500 / 1e3)
    out["record_build_us"] = statistics.median(builds)
    tracker.shutdown()
    out["clock_us"] = _med_loop(lambda n: [time.perf_counter_ns() for _ in range(n)], 200_000)
    out["ctxvar_get_us"] = _med_loop(lambda n: [CURRENT.get() for _ in range(n)], 200_000)
    return out


def blocks(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from bench_sdk_overhead import decode_instr, decode_model, decode_plain

    from inferensics.collector.host import InductorBackend, NullExporter, SdkConfig, instrument
    from inferensics.collector.host import fingerprint as fpmod
    from inferensics.collector.host import pipeline as pipemod

    if args.pin:
        os.sched_setaffinity(0, [int(c) for c in args.pin.split(",")])
    rng = random.Random(args.seed)
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
    import copy

    fns = {}
    order = rng.sample(["plain", "instr"], 2)
    with torch.no_grad():
        for name in order:
            m = copy.deepcopy(base)
            fn = torch.compile(m, backend=InductorBackend()) if name == "instr" else torch.compile(m)
            for _ in range(3):
                y = fn(x)
            sync()
            fns[name] = fn
    fpmod.start_fingerprint(y.clone()).result()
    t0 = time.perf_counter()
    while cuda and y.dtype not in fpmod.KERNELS.ready and not fpmod.KERNELS.failed and time.perf_counter() - t0 < 60:
        time.sleep(0.05)
    tracker = instrument(exporter=NullExporter(), host="d", model="d", config=SdkConfig())
    pipe = tracker.pipeline
    lazy = [False]
    awake = threading.Event()  # cleared for a nofp_lazy block: the background thread waits here until it ends
    awake.set()
    orig_drain = pipe.drain

    def drain(*, block: bool = False) -> None:
        if lazy[0] and threading.current_thread() is pipe._thread:
            # Wait, don't return: returning would leave the queue non-empty and the thread's loop would spin
            # without sleeping (session 15's first run did, in 9 of 32 blocks: 35 ms to 2.3 s per request).
            awake.wait()
            return
        orig_drain(block=block)

    pipe.drain = drain  # type: ignore[method-assign]
    ids = iter(range(10**12))
    k = 64
    instr = fns["instr"]
    runs = {
        "plain": partial(decode_plain, fns["plain"], x, k),
        "bare": partial(decode_plain, instr, x, k),
        "nofp": partial(decode_instr, tracker, instr, x, k, ids, fingerprint=False),
        "nofp_lazy": partial(decode_instr, tracker, instr, x, k, ids, fingerprint=False),
        "nofp_y20": partial(decode_instr, tracker, instr, x, k, ids, fingerprint=False),
        "instr": partial(decode_instr, tracker, instr, x, k, ids, fingerprint=True),
    }

    def scope_then_bare() -> None:  # an empty request scope (its record too), then the calls outside it
        with tracker.request(f"s{next(ids)}", shape=(8, 4096)):
            pass
        decode_plain(instr, x, k)

    runs["scope"] = scope_then_bare
    names = list(runs)
    with torch.no_grad():
        runs["instr"]()
        tracker.flush()
        rec: dict[str, list[list[float]]] = {v: [] for v in names}
        for _ in range(args.sweeps):
            for v in rng.sample(names, len(names)):
                one = runs[v]
                lazy[0] = v == "nofp_lazy"
                if lazy[0]:
                    awake.clear()
                pipemod.YIELD_AFTER_NS = 20_000 if v == "nofp_y20" else 100_000
                sync()
                p0, c0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
                for _ in range(args.block_reqs):
                    one()
                if v not in ("plain", "bare"):
                    tracker.flush()  # on this thread: the background thread of a nofp_lazy block still waits
                sync()
                wall = time.perf_counter() - t0
                serving = time.thread_time() - c0
                other = time.process_time() - p0 - serving
                if lazy[0]:
                    lazy[0] = False
                    awake.set()
                n = args.block_reqs
                rec[v].append([wall / n * 1e6, serving / n * 1e6, other / n * 1e6, _cpu_now()])
        lazy[0] = False
        pipemod.YIELD_AFTER_NS = 100_000
    tracker.shutdown()
    return {"order": order, "pin": args.pin, "blocks": rec}


def summarize(r: dict[str, Any]) -> str:
    rec = r["blocks"]
    names = list(rec)
    n = len(rec["bare"])
    lines = [f"pin={r['pin'] or 'none'} order={r['order']} sweeps={n}"]
    for v in names:
        ratios = [rec[v][i][0] / rec["bare"][i][0] for i in range(n)]
        wall = statistics.median([b[0] for b in rec[v]])
        off = statistics.median([b[0] - b[1] for b in rec[v]])
        other = statistics.median([b[2] for b in rec[v]])
        cpus = sorted({b[3] for b in rec[v]})
        lines.append(
            f"  {v:10s} vs bare {100 * (statistics.median(ratios) - 1):+6.2f} % | wall/req {wall:8.0f} us,"
            f" off-CPU {off:6.1f} us, other threads {other:6.1f} us | cpus {cpus}"
        )
    plain = [b[0] for b in rec["plain"]]
    lo = min(plain)
    lines.append(
        f"  plain blocks: min {lo:.0f} max {max(plain):.0f} us/req;"
        f" share > 1.2 x min {sum(p > 1.2 * lo for p in plain) / len(plain):.2f}"
    )
    return "\n".join(lines)


def pick_pin(path: str) -> str:
    """The pin of the diag's block processes whose plain blocks swung least (mean max/min), ``""`` for none."""
    spread: dict[str, list[float]] = {}
    with open(path) as fh:
        for line in fh:
            r = json.loads(line)
            if "blocks" not in r:
                continue
            plain = [b[0] for b in r["blocks"]["plain"]]
            spread.setdefault(r["pin"], []).append(max(plain) / min(plain))
    means = {pin: statistics.mean(v) for pin, v in spread.items()}
    print(f"plain-block max/min by pin: {means}", file=sys.stderr)
    return min(means, key=lambda pin: means[pin]) if means else ""


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--pick-pin":
        print(pick_pin(sys.argv[2]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("micro", "blocks"), required=True)
    ap.add_argument("--pin", default="")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sweeps", type=int, default=12)
    ap.add_argument("--block-reqs", type=int, default=6)
    ap.add_argument("--jsonl", default="")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--hidden", type=int, default=4096)
    args = ap.parse_args()
    if args.part == "micro":
        if args.pin:
            os.sched_setaffinity(0, [int(c) for c in args.pin.split(",")])
        out = micro()
        print("micro (us):", json.dumps({k: round(v, 3) for k, v in out.items()}), flush=True)
        r: dict[str, Any] = {"part": "micro", **out}
    else:
        r = blocks(args)
        print(summarize(r), flush=True)
    if args.jsonl:
        with open(args.jsonl, "a") as fh:
            fh.write(json.dumps(r) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
