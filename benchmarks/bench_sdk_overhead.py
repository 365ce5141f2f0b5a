"""Host-SDK overhead: per compiled-graph call and per request, instrumented vs plain on the same model in
one run, against torch.profiler enabled, and process memory over many requests.

    .venv/bin/python benchmarks/bench_sdk_overhead.py                  # CPU, small MLP
    python benchmarks/bench_sdk_overhead.py --device cuda --hidden 4096 --layers 4 --tokens 8   # decode-sized

Prints figures; asserts nothing. The exporter is the null exporter so the figures are the SDK's own cost
(hooks on the serving thread plus the background thread's record building competing for the GIL).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch

from inferensics.collector.host import InductorBackend, NullExporter, SdkConfig, Tracker, instrument


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _rss_mib() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _time_per(fn: Callable[[], Any], n: int, device: str) -> float:
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / n * 1e6


def _pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.1f} %"


def _one_request(tracker: Tracker, fn: Callable[[torch.Tensor], Any], x: torch.Tensor, ids: Iterator[int]) -> None:
    with tracker.request(f"r{next(ids)}", shape=tuple(x.shape)):
        fn(x)


def _decode_plain(fn: Callable[[torch.Tensor], Any], x: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        y = fn(x)
    del y


def _decode_instr(
    tracker: Tracker, fn: Callable[[torch.Tensor], Any], x: torch.Tensor, steps: int, ids: Iterator[int]
) -> None:
    with tracker.request(f"d{next(ids)}", shape=tuple(x.shape)) as req:
        for _ in range(steps):
            y = fn(x)
        req.set_output(y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timing round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--memory-requests", type=int, default=100_000)
    ap.add_argument("--decode-steps", type=int, default=64, help="compiled calls per request in the decode-like run")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads on CPU (shared CI machines)")
    args = ap.parse_args()
    dev = args.device
    if dev == "cpu":
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.hidden, args.hidden), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(dev).eval()
    x = torch.randn(args.tokens, args.hidden, device=dev)
    plain = torch.compile(model)
    instrumented = torch.compile(model, backend=InductorBackend())
    with torch.no_grad():
        for _ in range(3):
            plain(x)
            instrumented(x)
    print(f"torch {torch.__version__}, device {dev}, {args.layers}x Linear({args.hidden})+GELU, input {tuple(x.shape)}")

    # Interleaved rounds, minimum per variant: robust against other load on a shared machine. Wall time
    # measures the serving thread; process CPU time adds the SDK's background thread (GIL contention).
    rows: dict[str, list[float]] = {k: [] for k in ("call_plain", "call_instr", "req_plain", "req_instr", "req_prof")}
    cpu: dict[str, list[float]] = {"req_plain": [], "req_instr": []}
    n = args.calls
    counter = iter(range(10**9))
    with torch.no_grad():
        for _ in range(args.rounds):
            rows["call_plain"].append(_time_per(lambda: plain(x), n, dev))
            tracker = instrument(exporter=NullExporter(), host="bench", model="bench", config=SdkConfig())
            with tracker.request("calls"):
                rows["call_instr"].append(_time_per(lambda: instrumented(x), n, dev))
            c0 = time.process_time()
            rows["req_instr"].append(_time_per(partial(_one_request, tracker, instrumented, x, counter), n, dev))
            tracker.flush()
            cpu["req_instr"].append((time.process_time() - c0) / n * 1e6)
            tracker.shutdown()
            c0 = time.process_time()
            rows["req_plain"].append(_time_per(lambda: plain(x), n, dev))
            cpu["req_plain"].append((time.process_time() - c0) / n * 1e6)
            activities = [torch.profiler.ProfilerActivity.CPU]
            if dev == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            with torch.profiler.profile(activities=activities):
                rows["req_prof"].append(_time_per(lambda: plain(x), n, dev))
    best = {k: min(v) for k, v in rows.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    print(f"rounds {args.rounds} x {n} calls, best round per variant")
    added_call = best["call_instr"] - best["call_plain"]
    print(
        f"per compiled-graph call: plain {best['call_plain']:.2f} us, instrumented {best['call_instr']:.2f} us, "
        f"added {added_call:+.2f} us"
    )
    print(
        f"per request (1 call):    plain {best['req_plain']:.2f} us, instrumented {best['req_instr']:.2f} us, "
        f"added {best['req_instr'] - best['req_plain']:+.2f} us ({_pct(best['req_instr'], best['req_plain'])})"
    )
    print(
        f"process CPU per request: plain {best_cpu['req_plain']:.2f} us, instrumented {best_cpu['req_instr']:.2f} us "
        f"(includes the background thread building and exporting the record)"
    )
    print(
        f"torch.profiler enabled:  {best['req_prof']:.2f} us per call "
        f"(added {best['req_prof'] - best['req_plain']:+.2f} us, {_pct(best['req_prof'], best['req_plain'])})"
    )

    # Decode-like requests: many compiled calls (tokens) per request, with an output fingerprint.
    k = args.decode_steps
    reqs = max(n // k, 5)
    dec: dict[str, list[float]] = {"plain": [], "instr": [], "fp_only": []}
    with torch.no_grad():
        for _ in range(args.rounds):
            dec["plain"].append(_time_per(partial(_decode_plain, plain, x, k), reqs, dev))
            tracker = instrument(exporter=NullExporter(), host="bench", model="bench", config=SdkConfig())
            dec["instr"].append(_time_per(partial(_decode_instr, tracker, instrumented, x, k, counter), reqs, dev))
            with tracker.request("fp") as req:
                y = instrumented(x)
                dec["fp_only"].append(_time_per(partial(req.set_output, y), n, dev))
            tracker.shutdown()
    bd = {key: min(v) for key, v in dec.items()}
    print(
        f"decode-like request ({k} calls + fingerprint): plain {bd['plain']:.1f} us, "
        f"instrumented {bd['instr']:.1f} us, "
        f"added {bd['instr'] - bd['plain']:+.1f} us ({_pct(bd['instr'], bd['plain'])}); "
        f"set_output fingerprint alone {bd['fp_only']:.1f} us"
    )

    # Memory: requests through the instrumented path with output fingerprints, background export.
    tracker = instrument(exporter=NullExporter(), host="bench", model="bench", config=SdkConfig())
    marks = {args.memory_requests // 10, args.memory_requests // 2, args.memory_requests}
    gc.collect()
    base = _rss_mib()
    t0 = time.perf_counter()
    with torch.no_grad():
        for i in range(1, args.memory_requests + 1):
            with tracker.request(f"m{i}", shape=tuple(x.shape)) as req:
                req.set_output(instrumented(x))
            if i in marks:
                tracker.flush()
                gc.collect()
                print(
                    f"after {i:>7} requests: RSS {_rss_mib():8.1f} MiB (start {base:.1f} MiB), "
                    f"{(time.perf_counter() - t0) / i * 1e6:.1f} us/request incl. fingerprint"
                )
    tracker.shutdown()
    print("stats:", {k: v for k, v in tracker.stats().items() if v})


if __name__ == "__main__":
    main()
