"""Session 20, H200 calls 2 and 3: where a flush's time goes right after a decode-like request (default mode,
launch-bound), on the serving thread. Each Pipeline and fingerprint step is timed by a wrapper
(perf_counter_ns; nested steps count in their callers too), per flush: one request flushed at once (``nofp``:
no fingerprint; ``fp``; ``fp_after_sync``: the device synchronised first), six requests then one flush
(``fp6``), and a plain model's synchronisation after its last call (``plain_sync``).

Run from a tree built by ``s16_lead/build.sh`` (``PYTHONPATH=/tmp/site:tree python3 diag_flush.py``).
"""

import argparse
import collections
import functools
import statistics
import sys
import time
from typing import Any

import torch

sys.path.insert(0, "tree/benchmarks")
from bench_sdk_overhead import decode_model

from inferensics.collector.host import InductorBackend, NullExporter, SdkConfig, instrument
from inferensics.collector.host import fingerprint as fpm
from inferensics.collector.host import pipeline as pl

a = argparse.Namespace(device="cuda", hidden=4096, layers=4, tokens=8, dtype="bfloat16", vocab=32000)
base, x = decode_model(a)
acc: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
cur: dict[str, int] = {}


def timed(owner: Any, name: str, key: str) -> None:
    orig = getattr(owner, name)

    @functools.wraps(orig)
    def w(*args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return orig(*args, **kw)
        finally:
            cur[key] = cur.get(key, 0) + time.perf_counter_ns() - t0

    setattr(owner, name, w)


STEPS = [
    (pl.Pipeline, "_request"),
    (pl.Pipeline, "_finish"),
    (pl.Pipeline, "_finish_waiting"),
    (pl.Pipeline, "_mark"),
    (pl.Pipeline, "_fingerprint"),
    (pl.Pipeline, "_inputs"),
    (fpm.PendingFingerprint, "result"),
    (fpm.PendingFingerprint, "ready"),
    (fpm.PendingFingerprint, "_await_written"),
    (fpm.PendingFingerprint, "watch_with_event"),
    (fpm._PinnedPool, "give"),
    (fpm._Buffer, "snapshot"),
]
for owner, name in STEPS:
    timed(owner, name, f"{owner.__name__}.{name}")
fpm_finish = fpm.finish


def fin(*args: Any, **kw: Any) -> Any:
    t0 = time.perf_counter_ns()
    r = fpm_finish(*args, **kw)
    cur["finish"] = cur.get("finish", 0) + time.perf_counter_ns() - t0
    return r


fpm.finish = fin  # (the session-20 code folds a written buffer with fold(), timed inside result)
tr = instrument(exporter=NullExporter(), host="d", model="d", config=SdkConfig())
with torch.no_grad():
    fn = torch.compile(base, backend=InductorBackend())
    for _ in range(3):
        y = fn(x)
    fpm.start_fingerprint(y).result()
    t0 = time.perf_counter()
    while y.dtype not in fpm.KERNELS.ready and time.perf_counter() - t0 < 120:
        time.sleep(0.05)
    print("kernel ready", y.dtype in fpm.KERNELS.ready, "zero-copy", y.dtype in fpm.KERNELS.zero_copy)
    ids = iter(range(10**9))

    def req(fp: bool = True) -> None:
        with tr.request(f"r{next(ids)}", shape=(8, 4096)) as r:
            for _ in range(64):
                out = fn(x)
            if fp:
                r.set_output(out)

    for _ in range(5):
        req()
        tr.flush()
    torch.cuda.synchronize()
    for kind in ("plain_sync", "nofp", "fp", "fp_after_sync", "fp6"):
        tails = []
        for _ in range(40):
            cur.clear()
            if kind == "plain_sync":
                for _ in range(64):
                    y = fn(x)
                t1 = time.perf_counter_ns()
                torch.cuda.synchronize()
                tails.append(time.perf_counter_ns() - t1)
                continue
            for _ in range(6 if kind == "fp6" else 1):
                req(kind != "nofp")
            if kind == "fp_after_sync":
                torch.cuda.synchronize()
            t1 = time.perf_counter_ns()
            tr.flush()
            t2 = time.perf_counter_ns()
            torch.cuda.synchronize()
            t3 = time.perf_counter_ns()
            tails.append(t3 - t1)
            cur["flush"] = t2 - t1
            cur["sync_after"] = t3 - t2
            for k2, v in cur.items():
                acc[(kind, k2)].append(v)
        print(f"{kind}: after-last-call median {statistics.median(tails) / 1000:.1f} us (min {min(tails) / 1000:.1f})")
        for (k1, k2), v in sorted(acc.items()):
            if k1 == kind:
                print(f"   {k2:40s} median {statistics.median(v) / 1000:8.1f} us  n={len(v)}")
    print(tr.stats())
