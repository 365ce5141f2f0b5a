"""Where a decode request's fingerprint cost goes on the H200 (session 13 diagnosis, session 14's copy for the
kernel that folds a row's spans on the device: six numbers per row come back; prints, asserts nothing).

    python3 diag_fp_tail.py --mode reduce-overhead     # run from benchmarks/ (imports bench_sdk_overhead)

One process, the study's decode model (4 x Linear(4096)+GELU + Linear(4096, 32000), bf16, 8 tokens, 64 calls
per request), the instrumented artifact and a tracker with the null exporter. Per request (median of
``--reqs``), with and without ``set_output``: host us of the 64 launches (+ set_output + scope exit), of the
flush, of the device synchronisation after it, and inside the flush the us spent in the fingerprint's
wait (``_await_written`` spin, CUDA-event wait) and after it. Then the fingerprint kernel's device time
(CUDA events) on the model's output: zero-copy into the pooled pinned buffer (the SDK's planned path),
into a device buffer, and into a device buffer plus a copy into pinned memory; alone and right behind a
64-call request; the host us of ``start_fingerprint``; and a flush's CPU us when the device is already
idle (all of the SDK's record building, with and without the fingerprint).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="reduce-overhead")
    ap.add_argument("--reqs", type=int, default=30)
    a = ap.parse_args()
    import torch
    from bench_sdk_overhead import decode_instr, decode_model

    from inferensics.collector.host import InductorBackend, NullExporter, instrument
    from inferensics.collector.host import fingerprint as fpmod

    args = argparse.Namespace(device="cuda", hidden=4096, layers=4, vocab=32000, dtype="bfloat16", tokens=8)
    model, x = decode_model(args)
    mode = None if a.mode == "default" else a.mode
    k = 64
    with torch.no_grad():
        fn = torch.compile(model, backend=InductorBackend(mode=mode))
        for _ in range(3):
            y = fn(x)
        torch.cuda.synchronize()
        y = y.clone()
        fpmod.start_fingerprint(y).result()
        t0 = time.perf_counter()
        while y.dtype not in fpmod.KERNELS.ready and not fpmod.KERNELS.failed and time.perf_counter() - t0 < 120:
            time.sleep(0.05)
        launcher = fpmod.KERNELS.launchers.get(y.dtype)
        print(
            f"mode {a.mode}: kernel ready {sorted(map(str, fpmod.KERNELS.ready))} zero-copy "
            f"{sorted(map(str, fpmod.KERNELS.zero_copy))} launcher {launcher[2] if launcher else None} "
            f"failed {fpmod.KERNELS.failed!r} static {fpmod.KERNELS.static_failed!r}",
            flush=True,
        )

        # --- wait breakdown inside the flush ------------------------------------------------------
        spent: dict[str, float] = {"spin": 0.0, "event_wait": 0.0, "result": 0.0, "mark": 0.0}
        orig_await, orig_wait, orig_result = (
            fpmod.PendingFingerprint._await_written,
            fpmod._Completion.wait,
            fpmod.PendingFingerprint.result,
        )
        orig_watch = fpmod.PendingFingerprint.watch_with_event

        def timed(name: str, f: Any) -> Any:
            def g(*args: Any, **kw: Any) -> Any:
                t = time.perf_counter()
                try:
                    return f(*args, **kw)
                finally:
                    spent[name] += time.perf_counter() - t

            return g

        fpmod.PendingFingerprint._await_written = timed("spin", orig_await)  # type: ignore[method-assign]
        fpmod._Completion.wait = timed("event_wait", orig_wait)  # type: ignore[method-assign]
        fpmod.PendingFingerprint.result = timed("result", orig_result)  # type: ignore[method-assign]
        fpmod.PendingFingerprint.watch_with_event = timed("mark", orig_watch)  # type: ignore[method-assign]
        tracker = instrument(exporter=NullExporter(), host="diag", model="diag")
        ids = iter(range(10**9))
        for fp in (False, True, False, True):  # first pair: warm-up
            rows: dict[str, list[float]] = {
                n: [] for n in ("launch", "flush", "sync", "spin", "event_wait", "mark", "result_after_wait", "total")
            }
            for _ in range(a.reqs):
                for key in spent:
                    spent[key] = 0.0
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                decode_instr(tracker, fn, x, k, ids, fingerprint=fp)
                t1 = time.perf_counter()
                tracker.flush()
                t2 = time.perf_counter()
                torch.cuda.synchronize()
                t3 = time.perf_counter()
                rows["launch"].append(t1 - t0)
                rows["flush"].append(t2 - t1)
                rows["sync"].append(t3 - t2)
                rows["total"].append(t3 - t0)
                for key in ("spin", "event_wait", "mark"):
                    rows[key].append(spent[key])
                rows["result_after_wait"].append(spent["result"] - spent["spin"] - spent["event_wait"] - spent["mark"])
            print(
                f"  request {'with' if fp else 'without'} fingerprint, median us: "
                + " ".join(f"{n} {statistics.median(v) * 1e6:.1f}" for n, v in rows.items()),
                flush=True,
            )
        # a flush with the device idle: all of the SDK's per-request work after the request, on this thread
        for fp in (False, True):
            us = []
            for _ in range(a.reqs):
                decode_instr(tracker, fn, x, k, ids, fingerprint=fp)
                torch.cuda.synchronize()
                t = time.perf_counter()
                tracker.flush()
                us.append(time.perf_counter() - t)
            print(
                f"  flush with the device idle, {'with' if fp else 'without'} fingerprint: "
                f"median {statistics.median(us) * 1e6:.1f} us (min {min(us) * 1e6:.1f})",
                flush=True,
            )
        tracker.shutdown()
        fpmod.PendingFingerprint._await_written = orig_await  # type: ignore[method-assign]
        fpmod._Completion.wait = orig_wait  # type: ignore[method-assign]
        fpmod.PendingFingerprint.result = orig_result  # type: ignore[method-assign]
        fpmod.PendingFingerprint.watch_with_event = orig_watch  # type: ignore[method-assign]

        _guarded(lambda: _device_times(torch, fpmod, fn, x, k))
        _guarded(lambda: _per_call(torch, fn, x, k))


def _guarded(section: Any) -> None:
    try:
        section()
    except Exception:
        import traceback

        traceback.print_exc()
        sys.stdout.flush()


def _device_times(torch: Any, fpmod: Any, fn: Any, x: Any, k: int) -> None:
    # --- device time of the fingerprint kernel ---------------------------------------------------
    out = fn(x).clone()  # under CUDA graphs the next replay would overwrite the output
    x2 = out.reshape(-1, out.shape[-1])
    kernel = fpmod.KERNELS.kernel
    _span, chunks = fpmod.split(*x2.shape)
    n = x2.shape[0] * fpmod.STATS
    dev_buf = torch.empty(n, dtype=torch.float64, device="cuda")
    pinned = torch.empty(n, dtype=torch.float64, pin_memory=True)
    plan = fpmod._PLANS.get(fpmod._layout(out))

    def zero_copy() -> None:
        p = fpmod.start_fingerprint(out)
        pend.append(p)

    def device_only() -> None:
        fpmod.launch_kernel(kernel, x2, out=dev_buf)

    def device_copy() -> None:
        fpmod.launch_kernel(kernel, x2, out=dev_buf)
        pinned.copy_(dev_buf, non_blocking=True)

    pend: list[Any] = []
    print(
        f"  planned path for the output: {plan is not None}; {x2.shape[0]} rows x {chunks} spans = "
        f"{x2.shape[0] * chunks} programs, {n * 8} bytes written to the host (spans folded on the device)",
        flush=True,
    )
    for behind in (False, True):
        for name, f in (
            ("zero-copy (SDK)", zero_copy),
            ("device buffer", device_only),
            ("device buffer + copy", device_copy),
            ("zero-copy (SDK)", zero_copy),
        ):
            dev, host = [], []
            for _ in range(20):
                if behind:
                    for _ in range(k):
                        fn(x)
                else:
                    torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                t = time.perf_counter()
                f()
                host.append(time.perf_counter() - t)
                e1.record()
                e1.synchronize()
                dev.append(e0.elapsed_time(e1) * 1e3)
                for p in pend:
                    p.result()
                pend.clear()
            print(
                f"  fingerprint {name}, {'behind a 64-call request' if behind else 'device idle'}: device us "
                f"median {statistics.median(dev):.1f} (min {min(dev):.1f}, max {max(dev):.1f}); host us "
                f"median {statistics.median(host) * 1e6:.1f}",
                flush=True,
            )


def _per_call(torch: Any, fn: Any, x: Any, k: int) -> None:
    # --- per compiled call: what a request scope adds (bursts of 64 calls, variants interleaved) ----
    import gc
    import random

    from inferensics.collector.host import NullExporter, instrument, request_tracker, torch_adapter

    gc_s = [0.0, 0]
    gc_t = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_t[0] = time.perf_counter()
        else:
            gc_s[0] += time.perf_counter() - gc_t[0]
            gc_s[1] += 1 if info.get("generation") == 2 else 0

    gc.callbacks.append(on_gc)
    tracker = instrument(exporter=NullExporter(), host="diag", model="diag")
    rng = random.Random(5)
    names = ("out", "in", "in_nohook", "out_nohook", "in_flush")
    per: dict[str, list[float]] = {v: [] for v in names}
    gcs: dict[str, list[float]] = {v: [0.0, 0] for v in names}
    for _ in range(40):
        for v in rng.sample(names, len(names)):
            hook = "nohook" not in v
            if not hook:
                torch_adapter.set_guard_hook(None)
            scope = tracker.request("calls", shape=tuple(x.shape)) if v.startswith("in") else None
            torch.cuda.synchronize()
            g0, g1 = gc_s[0], gc_s[1]
            t = time.perf_counter()
            if scope is not None:
                scope.__enter__()
            for _ in range(k):
                fn(x)
            if scope is not None:
                scope.__exit__(None, None, None)
            if v.endswith("flush"):
                tracker.flush()
            torch.cuda.synchronize()
            per[v].append((time.perf_counter() - t) * 1e6 / k)
            gcs[v][0] += gc_s[0] - g0
            gcs[v][1] += gc_s[1] - g1
            if not hook:
                torch_adapter.set_guard_hook(request_tracker._guard_hook)
    tracker.shutdown()
    gc.callbacks.remove(on_gc)
    base = per["out"]
    for v in names:
        diffs = [a_ - b_ for a_, b_ in zip(per[v], base, strict=True)]
        print(
            f"  per call (64-call bursts, wall to sync) {v}: median {statistics.median(per[v]):.2f} us, "
            f"paired vs out {statistics.median(diffs):+.2f} us; gc {gcs[v][0] * 1e3:.2f} ms in 40 bursts "
            f"({gcs[v][1]} full)",
            flush=True,
        )
    # the wrapper's Python alone on this host
    from inferensics.collector.host.backend import _counting
    from inferensics.collector.host.records import CURRENT, GraphSlot, RawRequest

    wrapped = _counting(lambda *a_: None, GraphSlot(0, "0/0"))
    n = 200_000
    t = time.perf_counter()
    for _ in range(n):
        wrapped(x)
    out_us = (time.perf_counter() - t) / n * 1e6
    token = CURRENT.set(RawRequest("w", model="", traffic_class="", tenant="", shape="", ts=0.0))
    t = time.perf_counter()
    for _ in range(n):
        wrapped(x)
    in_us = (time.perf_counter() - t) / n * 1e6
    CURRENT.reset(token)
    hook = request_tracker._guard_hook
    t = time.perf_counter()
    for _ in range(n):
        hook(True)
    hook_us = (time.perf_counter() - t) / n * 1e6
    print(
        f"  wrapper Python per call: outside a request {out_us:.3f} us, inside {in_us:.3f} us; "
        f"guard hook (called from Python) {hook_us:.3f} us",
        flush=True,
    )
    # the decode request alone, for scale
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    e0.record()
    for _ in range(k):
        fn(x)
    e1.record()
    e1.synchronize()
    print(f"  64 calls: device us {e0.elapsed_time(e1) * 1e3:.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
