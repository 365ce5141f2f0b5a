"""Session 31: where a flush's tail goes after the device writes the last fingerprint (issue 25, point 10).

    python3 diag_tail.py --mode reduce-overhead   # from benchmarks/ (imports bench_sdk_overhead); asserts nothing

One process, the study's decode model (4 x Linear(4096)+GELU + Linear(4096, 32000), bf16, 8 tokens, 64 calls a
request), instrumented, null exporter. For blocks of ``--block`` requests flushed together (the study's block
protocol) and for single requests, with and without the fingerprint, stamps inside the flush (perf_counter ns):
the wait for the device (spin on the pinned buffer, then a CUDA event), each step after it (the buffer's
snapshot, the fold, the rest of the record's finish), the flush's return, then the study's device synchronisation.
Then the same flush with the device already idle (the pure CPU cost), and the same blocks with the SDK's code
paths warmed just before the wait (a fold of dummy numbers): if the tail is cold code, that shortens it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="reduce-overhead")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--block", type=int, default=6)
    a = ap.parse_args()
    import torch
    from bench_sdk_overhead import decode_instr, decode_model

    from inferensics.collector.host import InductorBackend, NullExporter, instrument
    from inferensics.collector.host import fingerprint as fpmod
    from inferensics.collector.host import pipeline as pipemod

    args = argparse.Namespace(device="cuda", hidden=4096, layers=4, vocab=32000, dtype="bfloat16", tokens=8)
    model, x = decode_model(args)
    mode = None if a.mode == "default" else a.mode
    k = 64
    stamps: dict[str, int] = {}
    clock = time.perf_counter_ns

    def stamp_around(owner: Any, name: str, before: str | None, after: str) -> Any:
        orig = getattr(owner, name)

        def g(*args_: Any, **kw: Any) -> Any:
            if before:
                stamps.setdefault(before, clock())
            try:
                return orig(*args_, **kw)
            finally:
                stamps[after] = clock()

        setattr(owner, name, g)
        return orig

    with torch.no_grad():
        fn = torch.compile(model, backend=InductorBackend(mode=mode))
        for _ in range(3):
            y = fn(x)
        torch.cuda.synchronize()
        fpmod.start_fingerprint(y.clone()).result()
        t0 = time.perf_counter()
        while y.dtype not in fpmod.KERNELS.ready and not fpmod.KERNELS.failed and time.perf_counter() - t0 < 120:
            time.sleep(0.05)
        print(f"mode {a.mode}: kernel ready {sorted(map(str, fpmod.KERNELS.ready))} failed {fpmod.KERNELS.failed!r}")
        stamp_around(fpmod.PendingFingerprint, "_await_written", "spin0", "spin1")
        stamp_around(fpmod._Completion, "wait", "wait0", "wait1")
        stamp_around(fpmod, "fold", "fold0", "fold1")
        stamp_around(pipemod.Pipeline, "_finish", None, "finish1")
        tracker = instrument(exporter=NullExporter(), host="diag", model="diag")
        warm = {"on": False}
        orig_wait = fpmod._Completion.wait

        def warmed_wait(self: Any) -> None:
            if warm["on"]:  # run the tail's own code on dummy numbers while the device still works
                fpmod.fold([0.0, 0.0, 1.0, 1.0, 1.0, 3.0] * 8, 8 * 32000, True, 16)
            orig_wait(self)

        fpmod._Completion.wait = warmed_wait  # type: ignore[method-assign]
        ids = iter(range(10**9))

        def run(block: int, fp: bool, idle: bool) -> dict[str, float]:
            torch.cuda.synchronize()
            for _ in range(block):
                decode_instr(tracker, fn, x, k, ids, fingerprint=fp)
            if idle:
                torch.cuda.synchronize()
            stamps.clear()
            t1 = clock()
            tracker.flush()
            t2 = clock()
            torch.cuda.synchronize()
            t3 = clock()
            out = {"flush": (t2 - t1) / 1e3, "sync": (t3 - t2) / 1e3}
            if "wait1" in stamps or "spin1" in stamps:
                ready = max(stamps.get("wait1", 0), stamps.get("spin1", 0))
                out["after_ready_to_return"] = (t2 - ready) / 1e3
                out["after_ready_to_synced"] = (t3 - ready) / 1e3
                if "fold1" in stamps and "fold0" in stamps and stamps["fold0"] >= ready:
                    out["ready_to_fold"] = (stamps["fold0"] - ready) / 1e3
                    out["fold"] = (stamps["fold1"] - stamps["fold0"]) / 1e3
                    if "finish1" in stamps:
                        out["fold_to_finished"] = (stamps["finish1"] - stamps["fold1"]) / 1e3
                        out["finished_to_return"] = (t2 - stamps["finish1"]) / 1e3
            return out

        for label, block, idle, warmed in (
            ("warm-up", a.block, False, False),
            (f"block of {a.block}", a.block, False, False),
            (f"block of {a.block}, tail code warmed before the wait", a.block, False, True),
            ("single request", 1, False, False),
            ("single request, tail code warmed", 1, False, True),
            (f"block of {a.block}, device idle before the flush", a.block, True, False),
        ):
            warm["on"] = warmed
            for fp in (False, True):
                rows: dict[str, list[float]] = defaultdict(list)
                for _ in range(a.reps):
                    for key, v in run(block, fp, idle).items():
                        rows[key].append(v)
                if label == "warm-up":
                    continue
                print(
                    f"{label}, {'fingerprint' if fp else 'no fingerprint'} (us, median [p25-p75] of {a.reps}): "
                    + "; ".join(
                        f"{n} {statistics.median(v):.1f} [{statistics.quantiles(v, n=4)[0]:.1f}-"
                        f"{statistics.quantiles(v, n=4)[2]:.1f}]"
                        for n, v in rows.items()
                    ),
                    flush=True,
                )
        tracker.shutdown()


if __name__ == "__main__":
    main()
