"""Host-SDK overhead as a randomised multi-process study: the SDK's cost separated from compile order and
callable placement.

    .venv/bin/python benchmarks/bench_sdk_study.py --device cpu --hidden 64 --procs 3 --rounds 4 --reqs 5 \
        --decode-steps 16 --bursts 4                                           # CPU smoke run, about a minute
    python3 benchmarks/bench_sdk_study.py --device cuda --hidden 4096 --layers 4 --tokens 8 \
        --dtype bfloat16 --vocab 32000 --procs 16 --rounds 12 --reqs 30 --budget-s 490 --profile \
        --jsonl study_bf16.jsonl                                               # decode-sized, H200
    python3 benchmarks/bench_sdk_study.py --device cuda --hidden 4096 --layers 4 --tokens 8 \
        --dtype bfloat16 --vocab 32000 --procs 8 --rounds 10 --reqs 30 --diagnose --fresh-cache \
        --budget-s 280 --seed 3 --jsonl fresh_bf16.jsonl                       # + where the cost goes, cold
    python3 benchmarks/bench_sdk_study.py --device cuda --hidden 4096 --layers 32 --tokens 8 \
        --dtype bfloat16 --vocab 32000 --procs 6 --rounds 8 --reqs 20 --budget-s 200 --seed 5 --profile \
        --jsonl study_deep_bf16.jsonl                                          # 32 layers: ~140 s/process
    python3 benchmarks/bench_sdk_study.py --device cuda --hidden 4096 --layers 4 --tokens 8 \
        --dtype bfloat16 --vocab 32000 --procs 12 --rounds 12 --reqs 30 --budget-s 430 --seed 12 \
        --mode reduce-overhead --jsonl study_ro.jsonl                          # under CUDA graphs, ~40 s/process
    python benchmarks/bench_sdk_study.py --from-jsonl study_bf16.jsonl fresh_bf16.jsonl   # pool saved lines
    TORCHINDUCTOR_COMPILE_THREADS=1 python3 benchmarks/bench_sdk_study.py --device cuda --hidden 4096 \
        --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000 --decode-steps 64 --reqs 10 --rounds 6 \
        --warmup-rounds 1 --procs 24 --no-control --fork --budget-s 225 --mode reduce-overhead --seed 11 \
        --jsonl study_ro.jsonl          # >= 16 processes in under 4 minutes (gpu/sdk/run.sh: both modes)
    TORCHINDUCTOR_COMPILE_THREADS=1 python3 benchmarks/bench_sdk_study.py --device cuda --hidden 4096 \
        --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000 --decode-steps 64 --reqs 5 --rounds 4 \
        --warmup-rounds 1 --bursts 5 --procs 22 --no-control --fork --interleave --budget-s 120 \
        --mode reduce-overhead --seed 31 --jsonl study_ro.jsonl   # request by request (session 13)
    TORCHINDUCTOR_COMPILE_THREADS=1 python3 benchmarks/bench_sdk_study.py --device cuda --hidden 4096 \
        --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000 --decode-steps 64 --reqs 6 --rounds 2 \
        --warmup-rounds 1 --bursts 4 --procs 16 --no-control --fork --interleave --blocks 5 --block-reqs 6 \
        --budget-s 150 --mode reduce-overhead --seed 51 --jsonl study_ro.jsonl   # + the throughput protocol
    TORCHINDUCTOR_COMPILE_THREADS=1 python3 benchmarks/bench_sdk_study.py --device cuda --hidden 4096 \
        --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000 --decode-steps 64 --reqs 4 --rounds 2 \
        --warmup-rounds 1 --bursts 4 --procs 16 --no-control --aa --fork --interleave --blocks 10 --block-reqs 6 \
        --budget-s 240 --mode default --seed 162 --jsonl study_default.jsonl   # + A/A, 20 blocks (session 16)

Why: in one process, the plain and the instrumented callables are two compiled artifacts, and which one
was compiled first (and where its weights and buffers landed) was seen to move throughput by more than
the 1 % the SDK is allowed, so a single-process comparison confounds the SDK with compile order. Here each
of ``--procs`` fresh Python processes (seeded by ``--seed`` and its index) builds the same model, gives
each variant its own copy of it (weights allocated in compile order) and compiles plain, an A/A control
and instrumented in a random order, warms up, then runs ``--rounds`` interleaved rounds (variant order
shuffled every round) of decode-like requests (``--decode-steps`` compiled calls per request, the shape
of bench_sdk_overhead.py's decode section), ``--reqs`` requests per variant per round:

- ``plain``: ``torch.compile(copy)``; ``control``: the same through a backend of its own that calls
  Inductor's ``compile_fx`` as the instrumented backend does, minus the counting wrapper (a second
  ``torch.compile(copy)`` with the default backend would reuse plain's Dynamo graph: no second compile);
  no tracker installed for either;
- ``instr_bare``: the instrumented callable with no tracker and outside any request (its wrapper then
  only reads a context variable): the same machine code and weights as the next two, so the
  same-artifact ratios cannot be confounded by compile order or placement;
- ``instr_nofp``, ``instr``: tracker installed (null exporter), every request scoped, without and with
  the output fingerprint; the tracker's flush runs inside the timed region;
- with ``--diagnose``, on the same artifact: ``hook_only`` (tracker installed, calls outside requests),
  ``instr_noguard`` (in requests, guard-complete hook taken out again), ``instr_lazy`` (in requests with
  the fingerprint, background thread idle so that all record building happens in the timed flush); and
  per round the serving-thread µs of one ``start_fingerprint`` and the µs of an empty request scope.

Every decode variant also records CPU µs per request of the serving thread and of the other threads (the
SDK's background thread). Each process also times serving-thread µs per compiled-graph call (bursts of
``--burst`` calls, host clock only, device synchronised outside the timing) for plain, control,
instr_bare and ``instr_in`` (the instrumented callable inside a request, tracker installed), and prints
one JSON line. The parent runs the processes one after another (one device; ``--budget-s`` launches no
process that may end past it), and reports per-process ratios (best round over best round, and the
median over rounds of the ratio within a round), their median across processes with a bootstrap 95 % CI
and min/max, the added µs per call, CPU per request, and whether a variant's position in the compile
order predicts its speed. Figure lines end with the load average of the machine that aggregates (the
per-process lines carry the measuring machine's). ``--profile``: the first process also prints
torch.profiler tables of the instrumented artifact outside and inside requests (device time, kernel
launches, synchronising calls). Prints figures; asserts nothing.

``--fork`` starts each worker as a fork of a parent that has imported torch, Dynamo, Inductor and the SDK
(and nothing else: no device context, no compile), which saves the imports per process; ``--no-control``
drops the A/A control artifact (one compile fewer; ``instr_bare`` against ``plain`` is the two-artifact
comparison then). ``--aa`` adds ``plain_aa``, the plain callable timed again as a variant of its own in
every random order: plain against itself, through the same pairing and medians as every other figure, is
each process's noise floor (a per-process figure can be read against the 2 % limit only where its A/A
spread is well inside it). The study ends with a TARGETS block: the issue's targets, each against its
figure, and the A/A noise floor beside them.

``--interleave`` times every request on its own instead of blocks of ``--reqs``: one request of each
variant at a time in a fresh random order, each drained in its own time (the tracker's flush, then a
device synchronisation), one tracker installed for the whole round; the within-round figure of a process
is then the median over all pairs of neighbouring requests, and each variant's time after its last call
(the flush, then the synchronisation) is printed apart: a fingerprint the flush must wait for shows
there as a serial tail after the device. On the H200 the default mode is bound by the
host's kernel launches (host and device time per call equal, 200-390 us, where the kernels take ~120 us)
and the host's launch speed switches between states within a process (a block of 10 requests took 12.7
or 16.7 ms per request): blocks of one variant fell into one state or the other, which read as a +4-8 %
cost in some processes and none in others; neighbouring requests share the state. ``--pin`` pins every
worker to CPUs (it did not change the spread there: every worker already ran on CPU 0), and each process
line shows the CPU it ran on and its host and device µs per call.

``--blocks N`` (with ``--interleave``) adds the throughput protocol in the same processes: per round N
blocks of every variant, one block of each at a time in a fresh random order, each ``--block-reqs``
requests back to back with no flush or synchronisation between them (the tracker's background thread
drains them as in serving), timed from the block's first launch to its end, the tracker's flush then a
device synchronisation included: all of the SDK's work, its flush too, is charged, amortised over the
block as a server amortises it (a server never flushes per request). Neighbouring blocks are paired as
neighbouring requests are. This is the issue's throughput figure (its TARGETS block comes last); the
request-by-request figure beside it charges every microsecond of the SDK's tail after the device (the
flush's wait for the fingerprint, its read, the second synchronisation) to every request.

``--fresh-cache`` gives every process empty Inductor and Triton cache folders (a cold first compile in
each); without it the processes share the machine's caches. Within a process the second and third
compiles hit the FX-graph cache either way (the JSON line counts Dynamo graphs and cache hits). Keep the
device side free of chDB, clickhouse-connect and streamlit: the SDK with the null exporter needs only
torch, pydantic and OpenTelemetry.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

PREFIX = "STUDY_JSON "
PROTOCOLS = {
    "request": "every request timed alone, flushed and synchronised in its own time (the per-request tail)",
    "block": "blocks of --block-reqs requests back to back, flush + synchronisation once per block "
    "(the issue's throughput figure)",
}
DECODE = ("plain", "plain_aa", "control", "instr_bare", "instr_nofp", "instr")
# --diagnose: where the same-artifact cost goes (all on the instrumented artifact).
DIAG = ("hook_only", "instr_noguard", "instr_lazy")
TRACKED = ("instr_nofp", "instr", "hook_only", "instr_noguard", "instr_lazy")
CALL = ("plain", "control", "instr_bare", "instr_in")
COMPILED = ("plain", "control", "instr")
# (numerator, denominator, what it says) for the decode-like requests.
COMPARISONS = (
    ("plain_aa", "plain", "A/A: plain against itself, a variant of its own (each process's noise floor)"),
    ("control", "plain", "A/A control vs plain (two plain artifacts: the noise floor)"),
    ("instr_bare", "plain", "instr. artifact, no request, vs plain (artifact/placement + contextvar read)"),
    ("instr_nofp", "plain", "instrumented, no fingerprint, vs plain"),
    ("instr", "plain", "instrumented + fingerprint vs plain (the 1 % target)"),
    ("instr_nofp", "instr_bare", "SAME ARTIFACT: in requests, no fingerprint, vs outside"),
    ("instr", "instr_bare", "SAME ARTIFACT: in requests + fingerprint vs outside"),
    ("hook_only", "instr_bare", "diagnose: tracker installed, calls outside requests (guard hook, no records)"),
    ("instr_noguard", "instr_bare", "diagnose: in requests, no fingerprint, guard hook removed"),
    ("instr_lazy", "instr_bare", "diagnose: in requests + fingerprint, background thread idle (all work in flush)"),
    ("instr_lazy", "instr", "diagnose: background thread idle vs draining every flush_interval_s"),
)
CALL_DIFFS = (
    ("control", "plain", "A/A control - plain"),
    ("instr_bare", "plain", "instr. artifact outside a request - plain"),
    ("instr_in", "plain", "instrumented in a request - plain (the 3 us target)"),
    ("instr_in", "instr_bare", "SAME ARTIFACT: in a request - outside"),
)


def _load() -> str:
    return "load avg " + " ".join(f"{v:.2f}" for v in os.getloadavg())


# --- worker ------------------------------------------------------------------------------------------


def _cpu_now() -> int:
    """The CPU the calling thread last ran on (field 39 of ``/proc/thread-self/stat``; -1 if unreadable)."""
    try:
        with open("/proc/thread-self/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def _numa_node(cpu: int) -> int:
    """The NUMA node of ``cpu`` (-1 if unknown)."""
    try:
        names = os.listdir(f"/sys/devices/system/cpu/cpu{cpu}")
    except OSError:
        return -1
    nodes = [int(n[4:]) for n in names if n.startswith("node") and n[4:].isdigit()]
    return nodes[0] if nodes else -1


def _gpu_numa_node(torch: Any) -> int:
    """The NUMA node the CUDA device hangs off (-1 if unknown)."""
    try:
        props = torch.cuda.get_device_properties(0)
        bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        with open(f"/sys/bus/pci/devices/{bus}/numa_node") as fh:
            return int(fh.read())
    except Exception:
        return -1


def pin_cpus(spec: str) -> list[int]:
    """Parse ``--pin``: ``""`` (no pinning), ``auto`` (the first two CPUs this process may use on the GPU's
    NUMA node, else the first two it may use) or a comma list; returns the CPUs to pin to."""
    if not spec:
        return []
    allowed = sorted(os.sched_getaffinity(0))
    if spec != "auto":
        return [int(c) for c in spec.split(",")]
    node = -1
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if out:
            bus = out[0].lower()[-12:]
            with open(f"/sys/bus/pci/devices/{bus}/numa_node") as fh:
                node = int(fh.read())
    except (OSError, ValueError):
        node = -1
    near = [c for c in allowed if _numa_node(c) == node] if node >= 0 else []
    return (near or allowed)[:2]


def _worker(args: argparse.Namespace) -> None:
    import torch

    # The model and the decode-like request loops are bench_sdk_overhead.py's (this script's sibling).
    from bench_sdk_overhead import decode_instr, decode_model, decode_plain
    from torch._dynamo.utils import counters

    from inferensics.collector.host import InductorBackend, NullExporter, SdkConfig, instrument, torch_adapter
    from inferensics.collector.host import fingerprint as fpmod

    dev = args.device
    cuda = dev == "cuda"
    if args.pin_cpus:
        os.sched_setaffinity(0, args.pin_cpus)
    if not cuda:
        torch.set_num_threads(args.threads)
    cpu_start = _cpu_now()
    rng = random.Random(args.seed * 1_000_003 + args.worker)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def tracker_on(config: SdkConfig | None = None) -> Any:
        return instrument(exporter=NullExporter(), host="study", model="study", config=config or SdkConfig())

    base, x = decode_model(args)  # the same weights in every process: only order and placement vary
    dtype = x.dtype

    # Each variant gets its own copy (weights allocated in compile order) and is compiled on first call.
    # The control goes through Inductor's compile_fx under a backend of its own, as the instrumented one
    # does, minus the counting wrapper: Dynamo keys its cache on the backend, so it is a second graph and
    # a second compile (a second torch.compile(copy) with the default backend would reuse plain's graph).
    mode = None if args.mode == "default" else args.mode
    mode_patches = torch_adapter.mode_options(mode)

    def _plain_compile_fx(gm: Any, example_inputs: list[Any]) -> Any:
        return torch_adapter.compile_fx(gm, example_inputs, mode_patches)

    compiled_names = tuple(v for v in COMPILED if v != "control" or not args.no_control)
    order = rng.sample(compiled_names, len(compiled_names))
    fns: dict[str, Callable[[Any], Any]] = {}
    compile_s: dict[str, float] = {}
    compiles: dict[str, dict[str, int]] = {}  # cumulative counters after each variant's first calls
    with torch.no_grad():
        for name in order:
            module = copy.deepcopy(base)
            t0 = time.perf_counter()
            if name == "instr":
                fn = torch.compile(module, backend=InductorBackend(mode=mode))
            elif name == "control":
                fn = torch.compile(module, backend=_plain_compile_fx)
            else:
                fn = torch.compile(module, mode=mode)
            for _ in range(3):
                y = fn(x)
            sync()
            compile_s[name] = round(time.perf_counter() - t0, 2)
            compiles[name] = {
                "dynamo_graphs": int(counters["stats"]["unique_graphs"]),
                "fx_cache_hit": int(counters["inductor"]["fxgraph_cache_hit"]),
                "fx_cache_miss": int(counters["inductor"]["fxgraph_cache_miss"]),
            }
            fns[name] = fn
    del base
    # Under CUDA graphs (--mode reduce-overhead) an output lives in the graph's pool and is overwritten by the
    # next replay: the fingerprint timing below keeps a copy of its own.
    y = y.clone()

    fp_ready_s = 0.0
    if cuda:  # the fused fingerprint kernel compiles in the background: wait, so every round uses it
        t0 = time.perf_counter()
        fpmod.start_fingerprint(y).result()
        while y.dtype not in fpmod.KERNELS.ready and not fpmod.KERNELS.failed and time.perf_counter() - t0 < 120:
            time.sleep(0.05)
        fp_ready_s = round(time.perf_counter() - t0, 2)
    launcher = fpmod.KERNELS.launchers.get(dtype)
    fp_path = (
        "torch ops inline (CPU)"
        if not cuda
        else f"fused kernel, zero-copy, {launcher[2]} launch"
        + (f" (static launcher: {fpmod.KERNELS.static_failed})" if fpmod.KERNELS.static_failed else "")
        if dtype in fpmod.KERNELS.zero_copy and launcher is not None
        else "fused kernel + D2H copy"
        if dtype in fpmod.KERNELS.ready
        else f"torch ops ({fpmod.KERNELS.failed or 'kernel not ready'})"
    )

    k, reqs, burst = args.decode_steps, args.reqs, args.burst
    ids = iter(range(10**12))

    def time_decode(variant: str) -> tuple[float, float, float]:
        """Wall µs per decode-like request over ``reqs`` requests, device synchronised at both ends; CPU µs
        per request of the serving thread and of the other threads (the SDK's background thread)."""
        instr = fns["instr"]
        tracker = None
        if variant in TRACKED:
            tracker = tracker_on(SdkConfig(flush_interval_s=1e6) if variant == "instr_lazy" else None)
            if variant == "instr_noguard":
                # diagnosis only: put back the hook that was there before the tracker (none, here)
                torch_adapter.set_guard_hook(tracker._previous_guard_hook)
        if variant in ("plain", "plain_aa", "control", "instr_bare", "hook_only"):
            art = "plain" if variant == "plain_aa" else variant if variant in ("plain", "control") else "instr"
            one = partial(decode_plain, fns[art], x, k)
        else:
            fp = variant in ("instr", "instr_lazy")
            one = partial(decode_instr, tracker, instr, x, k, ids, fingerprint=fp)
        if tracker is not None and variant != "hook_only":
            # One untimed request through the fresh tracker: its first-request work (dispatch template,
            # shape signature, fingerprint plan) is a per-tracker cost, not a per-request one; timed over
            # --reqs requests it read as about +0.5 % at 10 requests of 64 calls.
            one()
            tracker.flush()
        sync()
        p0, c0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
        for _ in range(reqs):
            one()
        if tracker is not None:
            tracker.flush()
        sync()
        us = (time.perf_counter() - t0) / int(reqs) * 1e6
        serving = (time.thread_time() - c0) / int(reqs) * 1e6
        other = (time.process_time() - p0) / int(reqs) * 1e6 - serving
        if tracker is not None:
            tracker.shutdown()
        return us, serving, other

    def interleaved_round(names: tuple[str, ...]) -> tuple[dict[str, float], dict[str, list[float]]]:
        """One round of ``--interleave``: ``reqs`` requests of every variant, one of each in a fresh random
        order at a time, each timed alone from its first call to its drain: the tracker's flush for the
        tracked variants (all of the request's SDK work, the fingerprint's wait included, inside its own
        time; nothing left over for the next request), then a device synchronisation for every variant (a
        decode step's tokens go back to the host anyway). One tracker is installed for the round (untimed);
        the untracked variants run outside any request, where the SDK costs them one guard-hook call and one
        context-variable read per compiled call. The host's launch speed changes between states within a
        process (seen on the H200: a round of 10 requests took 12.7 or 16.7 ms each); neighbours in time
        share the state, blocks of 10 requests per variant did not. Per variant: median µs per request, CPU
        µs per request of the serving thread and of the other threads."""
        tracker = tracker_on()
        instr = fns["instr"]
        runs = {
            "plain": partial(decode_plain, fns["plain"], x, k),
            "instr_bare": partial(decode_plain, instr, x, k),
            "instr_nofp": partial(decode_instr, tracker, instr, x, k, ids, fingerprint=False),
            "instr": partial(decode_instr, tracker, instr, x, k, ids, fingerprint=True),
        }
        if "control" in fns:
            runs["control"] = partial(decode_plain, fns["control"], x, k)
        runs["plain_aa"] = runs["plain"]  # --aa: the same callable timed as a variant of its own
        runs["instr"]()  # the fresh tracker's first-request work, untimed (see time_decode)
        tracker.flush()
        times: dict[str, list[float]] = {v: [] for v in names}
        drains: dict[str, list[float]] = {v: [] for v in names}  # after the last call: flush + synchronisation
        cpu_s: dict[str, list[float]] = {v: [0.0, 0.0] for v in names}
        for _ in range(reqs):
            for v in rng.sample(names, len(names)):
                sync()
                p0, c0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
                runs[v]()
                t1 = time.perf_counter()
                if v in ("instr_nofp", "instr"):
                    tracker.flush()
                sync()
                t2 = time.perf_counter()
                times[v].append(t2 - t0)
                drains[v].append(t2 - t1)
                serving = time.thread_time() - c0
                cpu_s[v][0] += serving
                cpu_s[v][1] += time.process_time() - p0 - serving
        tracker.shutdown()
        n = int(reqs)
        for v, t in times.items():
            blocks[v].append([round(u * 1e6, 2) for u in t])
            drain_blocks[v].append([round(u * 1e6, 2) for u in drains[v]])
        return (
            {v: statistics.median(t) * 1e6 for v, t in times.items()},
            {v: [c[0] / n * 1e6, c[1] / n * 1e6] for v, c in cpu_s.items()},
        )

    def block_round(names: tuple[str, ...], n_blocks: int) -> tuple[dict[str, float], dict[str, list[float]]]:
        """One round of the throughput protocol (``--blocks``): ``n_blocks`` blocks of every variant, one
        block of each in a fresh random order at a time, each block ``--block-reqs`` requests back to back
        (no flush, no synchronisation between them: the tracker's background thread drains them as it does
        in serving), timed from its first launch to its end: the tracker's flush for the tracked variants,
        then a device synchronisation for every variant, so all of the SDK's work, its flush included, is
        charged, amortised over the block. The device is idle at each block's start (synchronised,
        untimed). Per variant: median µs per request (block time over its requests), CPU µs per request of
        the serving thread and of the other threads; each block's time after its last call (flush +
        synchronisation) is kept apart."""
        tracker = tracker_on()
        instr = fns["instr"]
        runs = {
            "plain": partial(decode_plain, fns["plain"], x, k),
            "instr_bare": partial(decode_plain, instr, x, k),
            "instr_nofp": partial(decode_instr, tracker, instr, x, k, ids, fingerprint=False),
            "instr": partial(decode_instr, tracker, instr, x, k, ids, fingerprint=True),
        }
        if "control" in fns:
            runs["control"] = partial(decode_plain, fns["control"], x, k)
        runs["plain_aa"] = runs["plain"]  # --aa: the same callable timed as a variant of its own
        runs["instr"]()  # the fresh tracker's first-request work, untimed (see time_decode)
        tracker.flush()
        per_block = int(args.block_reqs)
        times: dict[str, list[float]] = {v: [] for v in names}
        drains: dict[str, list[float]] = {v: [] for v in names}
        cpu_s: dict[str, list[float]] = {v: [0.0, 0.0] for v in names}
        for _ in range(n_blocks):
            for v in rng.sample(names, len(names)):
                one = runs[v]
                sync()
                p0, c0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
                for _ in range(per_block):
                    one()
                t1 = time.perf_counter()
                if v in ("instr_nofp", "instr"):
                    tracker.flush()
                sync()
                t2 = time.perf_counter()
                times[v].append((t2 - t0) / per_block)
                drains[v].append(t2 - t1)
                serving = time.thread_time() - c0
                cpu_s[v][0] += serving
                cpu_s[v][1] += time.process_time() - p0 - serving
        tracker.shutdown()
        n = n_blocks * per_block
        for v, t in times.items():
            tp_blocks[v].append([round(u * 1e6, 2) for u in t])
            tp_drain_blocks[v].append([round(u * 1e6, 2) for u in drains[v]])
        return (
            {v: statistics.median(t) * 1e6 for v, t in times.items()},
            {v: [c[0] / n * 1e6, c[1] / n * 1e6] for v, c in cpu_s.items()},
        )

    def interleaved_calls(names: tuple[str, ...]) -> dict[str, float]:
        """Per-call timing for ``--interleave``: bursts of every variant in turn (fresh random order per
        burst index), the median burst per variant; ``instr_in`` bursts run inside a request scope entered
        and left outside the timing, the others outside any request (one tracker installed for all)."""
        tracker = tracker_on()
        per: dict[str, list[float]] = {v: [] for v in names}
        for _ in range(args.bursts):
            for v in rng.sample(names, len(names)):
                fn = fns["instr" if v in ("instr_bare", "instr_in") else v]
                scope = tracker.request("calls") if v == "instr_in" else None
                if scope is not None:
                    scope.__enter__()
                sync()
                t0 = time.perf_counter()
                for _ in range(burst):
                    fn(x)
                per[v].append((time.perf_counter() - t0) / int(burst) * 1e6)
                if scope is not None:
                    scope.__exit__(None, None, None)
        sync()
        tracker.shutdown()
        for v, t in per.items():
            call_blocks[v].append([round(u, 3) for u in t])
        return {v: statistics.median(t) for v, t in per.items()}

    def time_fp() -> float:
        """Serving-thread µs per ``start_fingerprint`` of the model's output (bursts, host clock only)."""
        total = 0.0
        for _ in range(args.bursts):
            sync()
            t0 = time.perf_counter()
            pending = [fpmod.start_fingerprint(y) for _ in range(burst)]
            total += time.perf_counter() - t0
            for p in pending:  # hand the pinned buffers back to the pool, untimed
                p.result()
        return total / (int(args.bursts) * int(burst)) * 1e6

    def time_empty_requests() -> float:
        """Wall µs per request scope with no call in it, the flush (record building) included."""
        tracker = tracker_on()
        n = int(args.bursts) * int(burst)
        t0 = time.perf_counter()
        for i in range(n):
            with tracker.request(f"e{i}", shape=tuple(x.shape)):
                pass
        tracker.flush()
        us = (time.perf_counter() - t0) / n * 1e6
        tracker.shutdown()
        return us

    def time_calls(variant: str) -> float:
        """Serving-thread µs per compiled-graph call: bursts of ``burst`` calls, host clock only."""
        fn = fns["instr" if variant in ("instr_bare", "instr_in") else variant]
        tracker = tracker_on() if variant == "instr_in" else None
        total = 0.0
        scope = tracker.request("calls") if tracker is not None else None
        if scope is not None:
            scope.__enter__()
        try:
            for _ in range(args.bursts):
                sync()
                t0 = time.perf_counter()
                for _ in range(burst):
                    fn(x)
                total += time.perf_counter() - t0
            sync()
        finally:
            if scope is not None:
                scope.__exit__(None, None, None)
            if tracker is not None:
                tracker.shutdown()
        return total / (int(args.bursts) * int(burst)) * 1e6

    def time_clock() -> tuple[float, float]:
        """µs per clock read (``time.perf_counter_ns``) and per context-variable read: the per-call wrapper
        does two of the first and one of the second (a slow clock source shows here)."""
        from inferensics.collector.host.records import CURRENT

        n = int(args.bursts) * int(burst) * 8
        clock, get = time.perf_counter_ns, CURRENT.get
        t0 = time.perf_counter()
        for _ in range(n):
            clock()
        t1 = time.perf_counter()
        for _ in range(n):
            get()
        t2 = time.perf_counter()
        return (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6

    def time_device() -> tuple[float, float]:
        """Host µs per call (launch loop only) and device µs per call (CUDA events) of ``k`` plain calls: which
        side bounds a decode-like request."""
        fn = fns["plain"]
        sync()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        t0 = time.perf_counter()
        for _ in range(k):
            fn(x)
        host = (time.perf_counter() - t0) / k * 1e6
        end.record()
        sync()
        return host, start.elapsed_time(end) * 1e3 / k

    keep = lambda names: tuple(  # noqa: E731
        v for v in names if (v != "control" or not args.no_control) and (v != "plain_aa" or args.aa)
    )
    variants = keep(DECODE) + (DIAG if args.diagnose and not args.interleave else ())
    calls = keep(CALL)
    decode: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[list[float]]] = {v: [] for v in variants}  # per round: [serving, other threads]
    call: dict[str, list[float]] = {v: [] for v in calls}
    # --interleave: per variant, per round, every request's (every burst's) time, in block order: the i-th
    # entries of two variants ran next to each other (the aggregate pairs them).
    blocks: dict[str, list[list[float]]] = {v: [] for v in variants}
    call_blocks: dict[str, list[list[float]]] = {v: [] for v in calls}
    drain_blocks: dict[str, list[list[float]]] = {v: [] for v in variants}
    # --blocks (the throughput protocol): the same per variant and round, one entry per block.
    tp_decode: dict[str, list[float]] = {v: [] for v in variants}
    tp_cpu: dict[str, list[list[float]]] = {v: [] for v in variants}
    tp_blocks: dict[str, list[list[float]]] = {v: [] for v in variants}
    tp_drain_blocks: dict[str, list[list[float]]] = {v: [] for v in variants}
    extra: dict[str, list[float]] = {
        "fp_host": [],
        "req_empty": [],
        "clock_us": [],
        "ctxvar_us": [],
        "host_call_us": [],
        "device_call_us": [],
    }
    with torch.no_grad():
        for _ in range(args.warmup_rounds):  # untimed: trackers, fingerprint pool, allocator, clocks
            if args.interleave:
                interleaved_round(variants)
                if args.blocks:
                    block_round(variants, 1)  # one block of each warms the same paths
                interleaved_calls(calls)
                continue
            for v in rng.sample(variants, len(variants)):
                time_decode(v)
            for v in rng.sample(calls, len(calls)):
                time_calls(v)
        # the warm-up rounds' are not figures
        for kept in (*blocks.values(), *call_blocks.values(), *drain_blocks.values(), *tp_blocks.values()):
            kept.clear()
        for kept in tp_drain_blocks.values():
            kept.clear()
        for _ in range(args.rounds):
            if args.interleave:
                medians, cpus = interleaved_round(variants)
                for v in variants:
                    decode[v].append(round(medians[v], 3))
                    cpu[v].append([round(c, 2) for c in cpus[v]])
                if args.blocks:
                    medians, cpus = block_round(variants, args.blocks)
                    for v in variants:
                        tp_decode[v].append(round(medians[v], 3))
                        tp_cpu[v].append([round(c, 2) for c in cpus[v]])
                for v, us in interleaved_calls(calls).items():
                    call[v].append(round(us, 4))
            else:
                for v in rng.sample(variants, len(variants)):
                    us, serving, other = time_decode(v)
                    decode[v].append(round(us, 3))
                    cpu[v].append([round(serving, 2), round(other, 2)])
                for v in rng.sample(calls, len(calls)):
                    call[v].append(round(time_calls(v), 4))
            if cuda:
                host_us, device_us = time_device()
                extra["host_call_us"].append(round(host_us, 2))
                extra["device_call_us"].append(round(device_us, 2))
            clock_us, ctxvar_us = time_clock()
            extra["clock_us"].append(round(clock_us, 4))
            extra["ctxvar_us"].append(round(ctxvar_us, 4))
            if args.diagnose:
                extra["fp_host"].append(round(time_fp(), 3))
                extra["req_empty"].append(round(time_empty_requests(), 3))
    if args.profile:
        with torch.no_grad():
            _profile_requests(torch, fns["instr"], tracker_on, x, k, cuda=cuda)
    out = {
        "index": args.worker,
        "seed": args.seed,
        "order": order,
        "mode": args.mode,
        "interleave": bool(args.interleave),
        "compile_s": compile_s,
        "compiles": compiles,
        "fp_ready_s": fp_ready_s,
        "fp_path": fp_path,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "decode": decode,
        "call": call,
        "cpu": cpu,
        **({"blocks": blocks, "call_blocks": call_blocks, "drain_blocks": drain_blocks} if args.interleave else {}),
        **(
            {
                "throughput": {
                    "block_reqs": args.block_reqs,
                    "decode": tp_decode,
                    "cpu": tp_cpu,
                    "blocks": tp_blocks,
                    "drain_blocks": tp_drain_blocks,
                }
            }
            if args.interleave and args.blocks
            else {}
        ),
        "extra": extra,
        "load": [round(v, 2) for v in os.getloadavg()],
        "placement": {
            "cpu_start": cpu_start,
            "cpu_end": _cpu_now(),
            "numa": _numa_node(_cpu_now()),
            "gpu_numa": _gpu_numa_node(torch) if cuda else -1,
            "affinity": len(os.sched_getaffinity(0)),
            "switch_interval_us": round(sys.getswitchinterval() * 1e6),
        },
    }
    print(PREFIX + json.dumps(out), flush=True)


def _profile_requests(
    torch: Any, instr: Callable[[Any], Any], tracker_on: Callable[[], Any], x: Any, k: int, *, cuda: bool
) -> None:
    """torch.profiler over 5 decode-like requests of the instrumented artifact, outside requests and in
    them with the fingerprint: device time, kernel launches, synchronising calls, top host ops."""
    from bench_sdk_overhead import decode_instr, decode_plain

    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    ids = iter(range(10**9))
    for variant in ("instr_bare", "instr"):
        tracker = tracker_on() if variant == "instr" else None
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(5):
                if tracker is None:
                    decode_plain(instr, x, k)
                else:
                    decode_instr(tracker, instr, x, k, ids, fingerprint=True)
            if tracker is not None:
                tracker.flush()
            if cuda:
                torch.cuda.synchronize()
        if tracker is not None:
            tracker.shutdown()
        events = prof.key_averages()
        syncs = {e.key: e.count for e in events if "ynchronize" in e.key or e.key in ("cudaMemcpy", "cudaMemcpyAsync")}
        launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx"))
        # Kernels only: an operator's self device time is the time of the kernels it launched, which are
        # events of their own in the same table (summing both counted every kernel twice).
        device_us = sum(e.self_device_time_total for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
        print(
            f"profile {variant}, 5 requests x {k} calls: device time {device_us / 5:.1f} us/request, "
            f"kernel launches {launches / 5:.1f}/request, synchronising/copy calls {syncs}"
        )
        print(events.table(sort_by="self_cpu_time_total", row_limit=10, max_name_column_width=44))


# --- parent ------------------------------------------------------------------------------------------


def _ratios(runs: list[dict[str, Any]], num: str, den: str) -> tuple[list[float], list[float]]:
    """Per process: best-round ratio, and the median over rounds of the within-round ratio."""
    best, paired = [], []
    for r in runs:
        a, b = r["decode"][num], r["decode"][den]
        best.append(min(a) / min(b))
        if "blocks" in r:  # --interleave: the median over every pair of neighbouring requests
            pairs = [
                x / y
                for ra, rb in zip(r["blocks"][num], r["blocks"][den], strict=True)
                for x, y in zip(ra, rb, strict=True)
            ]
            paired.append(statistics.median(pairs))
        else:
            paired.append(statistics.median(x / y for x, y in zip(a, b, strict=True)))
    return best, paired


def _call_diffs(r: dict[str, Any], num: str, den: str) -> float:
    """Per process: the added µs per call of ``num`` over ``den``, the median over rounds of the round's
    difference, or with ``--interleave`` the median over neighbouring bursts."""
    if "call_blocks" in r:
        return statistics.median(
            x - y
            for ra, rb in zip(r["call_blocks"][num], r["call_blocks"][den], strict=True)
            for x, y in zip(ra, rb, strict=True)
        )
    return statistics.median(a - b for a, b in zip(r["call"][num], r["call"][den], strict=True))


def _boot_ci(values: list[float], n: int, rng: random.Random) -> tuple[float, float]:
    """Bootstrap 95 % CI of the median (processes resampled with replacement)."""
    if len(values) < 2:
        return values[0], values[0]
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * (n - 1))], meds[int(0.975 * (n - 1))]


def _pct(r: float) -> str:
    return f"{(r - 1) * 100:+.2f} %"


def _distribution(ratios: list[float], limit: float = 1.02) -> str:
    """Every process's ratio, sorted, and how many are above ``limit`` (a split into groups shows here)."""
    above = sum(r > limit for r in ratios)
    return " ".join(_pct(r) for r in sorted(ratios)) + f"  ({above} of {len(ratios)} above {_pct(limit)})"


def _summary(values: list[float], boot: int, rng: random.Random, fmt: Callable[[float], str]) -> str:
    lo, hi = _boot_ci(values, boot, rng)
    return (
        f"median {fmt(statistics.median(values))}, 95 % CI [{fmt(lo)}, {fmt(hi)}], "
        f"min/max [{fmt(min(values))}, {fmt(max(values))}]"
    )


def _aggregate(runs: list[dict[str, Any]], boot: int, header: str) -> None:
    rng = random.Random(20261201)
    n = len(runs)
    rounds = len(runs[0]["decode"]["plain"])
    print(f"\n=== study: {n} processes; {header}; {rounds} rounds each; {runs[0]['torch']}, {runs[0]['device']}")
    print(f"fingerprint path: {sorted({r['fp_path'] for r in runs})}")
    if any("blocks" in r for r in runs):
        print(
            "interleaved (--interleave): 'within-round' below is, per process, the median over all pairs of "
            "neighbouring requests (bursts for the per-call figures) of the two variants"
        )
    last = [r["compiles"][r["order"][-1]] for r in runs]
    graphs = sorted({c["dynamo_graphs"] for c in last})
    hits, misses = sorted({c["fx_cache_hit"] for c in last}), sorted({c["fx_cache_miss"] for c in last})
    print(
        f"compiles per process: Dynamo graphs {graphs}, FX-graph cache hits {hits}, misses {misses} "
        f"({len(runs[0]['order'])} graphs: {', '.join(sorted(runs[0]['order']))} compiled apart)"
    )
    for protocol, view in _views(runs):
        _decode_section(view, boot, rng, protocol)

    def us(v: float) -> str:
        return f"{v:+.2f} us"

    runs = [{**r, "cpu": r.get("cpu", {}), "extra": r.get("extra", {})} for r in runs]

    for name, what in (
        ("fp_host", "serving-thread us per start_fingerprint (the fingerprint launch)"),
        ("req_empty", "wall us per empty request scope incl. record building (flush)"),
    ):
        vals = [min(r["extra"][name]) for r in runs if r["extra"].get(name)]
        meds = [statistics.median(r["extra"][name]) for r in runs if r["extra"].get(name)]
        if vals:
            print(
                f"{what}: best round median {statistics.median(vals):.2f} (min/max {min(vals):.2f}/{max(vals):.2f}), "
                f"median round median {statistics.median(meds):.2f}; {_load()}"
            )

    plain_call = [min(r["call"]["plain"]) for r in runs]
    print(
        f"serving-thread us per compiled-graph call (best round): plain median {statistics.median(plain_call):.2f} "
        f"us (min/max {min(plain_call):.2f}/{max(plain_call):.2f}); added:"
    )
    for num, den, what in CALL_DIFFS:
        sub = [r for r in runs if num in r["call"] and den in r["call"]]
        if not sub:
            continue
        best = [min(r["call"][num]) - min(r["call"][den]) for r in sub]
        paired = [_call_diffs(r, num, den) for r in sub]
        print(f"  {what}:")
        print(f"    best round           {_summary(best, boot, rng, us)}; {_load()}")
        print(f"    within-round median  {_summary(paired, boot, rng, us)}; {_load()}")
    clock = [statistics.median(r["extra"]["clock_us"]) for r in runs if r["extra"].get("clock_us")]
    ctxvar = [statistics.median(r["extra"]["ctxvar_us"]) for r in runs if r["extra"].get("ctxvar_us")]
    if clock:
        print(
            f"  for reference: one clock read {statistics.median(clock):.3f} us, one context-variable read "
            f"{statistics.median(ctxvar):.3f} us (median over processes; the wrapper makes two and one)"
        )
    for protocol, view in _views(runs):
        _targets(view, boot, rng, protocol)


def _decode_section(runs: list[dict[str, Any]], boot: int, rng: random.Random, protocol: str) -> None:
    """Per-process lines, the throughput comparisons, the tail after the last call and the CPU per request of
    one timing protocol (``request``: every request alone; ``block``: the throughput protocol)."""
    n = len(runs)
    unit = "request" if protocol == "request" else f"block of {runs[0]['throughput']['block_reqs']} requests"
    print(f"\n--- protocol {protocol!r}: {PROTOCOLS[protocol]}")
    print("per process, decode-like request, best round in us (compile order; ratios vs plain, same-artifact):")
    for r in runs:
        b = {v: min(r["decode"][v]) for v in DECODE if v in r["decode"]}
        comp = " ".join(f"{v}:{r['compile_s'][v]:.0f}s" for v in r["order"])
        control = f"control {_pct(b['control'] / b['plain'])} " if "control" in b else ""
        control += f"A/A {_pct(b['plain_aa'] / b['plain'])} " if "plain_aa" in b else ""
        place = r.get("placement", {})
        ex = r.get("extra", {})
        where = (
            f" cpu {place['cpu_start']}->{place['cpu_end']} node {place['numa']} (gpu {place['gpu_numa']})"
            if place
            else ""
        )
        bound = (
            f" host/device us per call {statistics.median(ex['host_call_us']):.0f}/"
            f"{statistics.median(ex['device_call_us']):.0f}"
            if ex.get("host_call_us")
            else ""
        )
        print(
            f"  s{r['seed']}p{r['index']:<2} [{comp}] plain {b['plain']:.1f} {control}"
            f"bare {_pct(b['instr_bare'] / b['plain'])} nofp {_pct(b['instr_nofp'] / b['plain'])} "
            f"instr {_pct(b['instr'] / b['plain'])} | same-artifact nofp {_pct(b['instr_nofp'] / b['instr_bare'])} "
            f"instr {_pct(b['instr'] / b['instr_bare'])};{where}{bound}; load {r['load'][0]:.2f}"
        )
    print(f"decode-like request throughput cost across {n} processes (bootstrap CI of the median, {boot} resamples):")
    for num, den, what in COMPARISONS:
        sub = [r for r in runs if num in r["decode"] and den in r["decode"]]
        if not sub:
            continue
        best, paired = _ratios(sub, num, den)
        print(f"  {what}{'' if len(sub) == n else f' ({len(sub)} processes)'}:")
        print(f"    best-round ratio     {_summary(best, boot, rng, _pct)}; {_load()}")
        print(f"    within-round median  {_summary(paired, boot, rng, _pct)}; {_load()}")
        print(f"    per process (within-round, sorted): {_distribution(paired)}")
    # Does the position in the compile order predict speed? Plain artifacts only (no SDK activity):
    # each one's best round over the mean of the three, grouped by the position it was compiled in.
    pos: dict[int, list[float]] = {0: [], 1: [], 2: []}
    for r in runs:
        b = {"plain": min(r["decode"]["plain"]), "instr": min(r["decode"]["instr_bare"])}
        if "control" in r["decode"]:
            b["control"] = min(r["decode"]["control"])
        mean = sum(b.values()) / len(b)
        for i, name in enumerate(r["order"]):
            pos[i].append(b[name] / mean)
    print(
        "compile-order effect (plain, control, instr_bare best rounds over their mean, by compile position): "
        + ", ".join(f"{i + 1}. {_pct(statistics.mean(v))} (n={len(v)})" for i, v in pos.items() if v)
        + f"; {_load()}"
    )

    # Lines written before the CPU and --diagnose figures existed have neither.
    runs = [{**r, "cpu": r.get("cpu", {}), "extra": r.get("extra", {})} for r in runs]
    with_drain = [v for v in DECODE if any(v in r.get("drain_blocks", {}) for r in runs)]
    if with_drain:
        # --interleave: the request's (the block's) time after its last compiled call (the tracker's flush, then
        # the device synchronisation): where a fingerprint that must wait for the device shows as a serial tail.
        drain_med = {
            v: statistics.median(
                statistics.median(u for block in r["drain_blocks"][v] for u in block)
                for r in runs
                if v in r.get("drain_blocks", {})
            )
            for v in with_drain
        }
        print(
            f"us per {unit} after its last call (flush + device synchronisation; median over processes "
            f"of the median {unit}): " + "; ".join(f"{v} {u:.0f}" for v, u in drain_med.items()) + f"; {_load()}"
        )
    with_cpu = [v for v in DECODE + DIAG if any(v in r["cpu"] for r in runs)]
    if with_cpu:
        print(
            "CPU us per decode-like request (median over processes of the median round): serving thread / other threads"
        )
        med: dict[str, list[float]] = {}
        for v in with_cpu:
            for i in (0, 1):
                med[f"{v}{i}"] = [statistics.median(c[i] for c in r["cpu"][v]) for r in runs if v in r["cpu"]]
        print(
            "  "
            + "; ".join(
                f"{v} {statistics.median(med[f'{v}0']):.0f} / {statistics.median(med[f'{v}1']):.0f}" for v in with_cpu
            )
            + f"; {_load()}"
        )


def _views(runs: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The runs as each protocol timed them: ``request`` (as recorded) and, where ``--blocks`` ran,
    ``block`` (the throughput protocol's figures in place of the request protocol's), that one last."""
    views = [("request", runs)]
    tp = [r for r in runs if "throughput" in r]
    if tp:
        views.append(
            (
                "block",
                [
                    {**r, **{key: r["throughput"][key] for key in ("decode", "cpu", "blocks", "drain_blocks")}}
                    for r in tp
                ],
            )
        )
    return views


def _targets(runs: list[dict[str, Any]], boot: int, rng: random.Random, protocol: str = "request") -> None:
    """The issue's targets, each against its figure: throughput cost with the fingerprint (instr vs plain,
    the within-round median per process), its CI's upper bound and distance from the median, the worst
    process, and the per-call cost inside a request."""
    mode = runs[0].get("mode", "default")
    limit = 1.0 if mode == "reduce-overhead" else 2.0
    print(f"TARGETS ({mode}; protocol {protocol!r}: {PROTOCOLS[protocol]}; {len(runs)} processes):")
    timed = [r["extra"] for r in runs if r.get("extra", {}).get("host_call_us")]
    if timed:
        # Which kind of host ran it: where the serving thread keeps ahead of the device, the SDK's host work
        # overlaps the device's; where it does not (launch-bound), all of it is on the critical path.
        host = statistics.median(statistics.median(e["host_call_us"]) for e in timed)
        device = statistics.median(statistics.median(e["device_call_us"]) for e in timed)
        kind = "launch-bound: host work is on the critical path" if host >= 0.95 * device else "device-bound"
        print(f"  host: serving-thread {host:.0f} us per compiled call, device {device:.0f} us ({kind})")
    for num, den, what in (("instr", "plain", "vs plain"), ("instr", "instr_bare", "same artifact")):
        for name, pick in (("within-round", 1), ("best-round", 0)):
            cost = [(v - 1) * 100 for v in _ratios(runs, num, den)[pick]]
            med = statistics.median(cost)
            lo, hi = _boot_ci(cost, boot, rng)
            worst = max(cost)
            above = sum(c > 2.0 for c in cost)
            verdict = "holds" if med <= limit and hi - med <= 1.0 and worst <= 2.0 else "DOES NOT HOLD"
            print(
                f"  throughput cost with the fingerprint, {what}, {name}: median {med:+.2f} % "
                f"(target <= {limit:.0f} %), "
                f"95 % CI [{lo:+.2f}, {hi:+.2f}] (upper bound {hi - med:+.2f} points from the median, target <= 1), "
                f"max process {worst:+.2f} % ({above} above +2 %): {verdict}"
            )
    if all("plain_aa" in r["decode"] for r in runs):
        # The same statistic for plain against itself: how far a process's figure moves with no SDK at all.
        aa = [(v - 1) * 100 for v in _ratios(runs, "plain_aa", "plain")[1]]
        lo, hi = _boot_ci(aa, boot, rng)
        print(
            f"  noise floor, A/A (plain against itself, within-round): median {statistics.median(aa):+.2f} %, "
            f"95 % CI [{lo:+.2f}, {hi:+.2f}], per process min/max [{min(aa):+.2f}, {max(aa):+.2f}] % "
            f"({sum(abs(a) > 1.0 for a in aa)} beyond +-1 %, {sum(a > 2.0 for a in aa)} above +2 %)"
        )
    for num, den, what in (("instr_in", "plain", "vs plain"), ("instr_in", "instr_bare", "same artifact")):
        paired = [_call_diffs(r, num, den) for r in runs]
        med = statistics.median(paired)
        lo, hi = _boot_ci(paired, boot, rng)
        print(
            f"  per-call cost inside a request, {what}: median {med:+.2f} us, 95 % CI [{lo:+.2f}, {hi:+.2f}], "
            f"max process {max(paired):+.2f} us (target <= 3 us): {'holds' if med <= 3.0 else 'DOES NOT HOLD'}"
        )


def _worker_cmd(args: argparse.Namespace, index: int) -> list[str]:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(index)]
    for name in (
        "device",
        "hidden",
        "layers",
        "tokens",
        "dtype",
        "vocab",
        "decode_steps",
        "reqs",
        "rounds",
        "warmup_rounds",
        "burst",
        "bursts",
        "threads",
        "seed",
        "mode",
        "pin",
        "blocks",
        "block_reqs",
    ):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return cmd


def _preload() -> None:
    """Import what every worker imports, once, before the workers are forked (``--fork``): torch, the SDK,
    Dynamo and Inductor. Nothing here touches a device or compiles, so each forked worker still starts
    with no CUDA context, no compiled graph and empty in-memory compile caches: a fresh process but for
    the few seconds of imports. (CUDA's driver must not be initialised before a fork: device checks go
    through NVML here, and ``_parent`` falls back to fresh interpreters if the first forked worker fails.)"""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch
    import torch._dynamo
    import torch._inductor.compile_fx  # noqa: F401
    from bench_sdk_overhead import decode_model  # noqa: F401

    from inferensics.collector.host import instrument  # noqa: F401


def _forked(args: argparse.Namespace, index: int, env: dict[str, str]) -> tuple[int, str, str]:
    """Run worker ``index`` in a forked child of this (preloaded) process: exit code, stdout, stderr."""
    import traceback

    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                os.environ.update(env)
                worker = argparse.Namespace(**{**vars(args), "worker": index, "profile": args.profile and index == 0})
                _worker(worker)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(status), out.read(), err.read()


def _parent(args: argparse.Namespace) -> None:
    header = (
        f"{args.layers}x Linear({args.hidden})+GELU{f' + Linear({args.hidden}, {args.vocab})' if args.vocab else ''}, "
        f"{args.dtype}, {args.tokens} tokens, {args.device}, mode {args.mode}; {args.decode_steps} calls/request, "
        f"{args.reqs} requests per variant per round"
        + (", interleaved request by request (each drained in its own time)" if args.interleave else "")
        + (
            f"; throughput protocol: {args.blocks} blocks of {args.block_reqs} requests per variant per round"
            if args.blocks
            else ""
        )
    )
    runs: list[dict[str, Any]] = []
    if args.from_jsonl:
        for path in args.from_jsonl:
            with open(path) as fh:
                runs += [json.loads(line.removeprefix(PREFIX)) for line in fh if line.strip()]
        _aggregate(runs, args.boot, f"from {' '.join(args.from_jsonl)}")
        return
    pinned = f"; workers pinned to CPUs {args.pin_cpus}" if args.pin_cpus else ""
    print(f"study: up to {args.procs} processes, {header}; budget {args.budget_s} s{pinned}; {_load()}", flush=True)
    if args.fork:
        t0 = time.perf_counter()
        _preload()
        print(f"preloaded torch, Dynamo, Inductor and the SDK in {time.perf_counter() - t0:.1f} s (--fork)", flush=True)
    sink = open(args.jsonl, "a") if args.jsonl else None  # noqa: SIM115 - appended to as workers finish
    start = time.perf_counter()
    took: list[float] = []
    for i in range(args.procs):
        elapsed = time.perf_counter() - start
        # The next process is expected to take as long as the slowest of the last three (the first one,
        # which fills the compile caches on a fresh machine, stops counting once three others have run).
        if took and args.budget_s and elapsed + max(took[-3:]) > args.budget_s:
            print(f"budget: stopping after {len(runs)} processes ({elapsed:.0f} s elapsed)", flush=True)
            break
        env = dict(os.environ)
        cache = tempfile.mkdtemp(prefix=f"study{i}_") if args.fresh_cache else ""
        if cache:
            env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
            env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
        t0 = time.perf_counter()
        if args.fork:
            rc, stdout, stderr = _forked(args, i, {k: v for k, v in env.items() if os.environ.get(k) != v})
            if rc != 0 and not runs:
                print(f"p{i}: the forked worker failed (rc={rc}); fresh interpreters from here on:\n{stderr[-2000:]}")
                args.fork = False
                took.append(time.perf_counter() - t0)
                continue
        else:
            cmd = _worker_cmd(args, i) + (["--profile"] if args.profile and i == 0 else [])
            cmd += ["--diagnose"] if args.diagnose else []
            cmd += ["--no-control"] if args.no_control else []
            cmd += ["--aa"] if args.aa else []
            cmd += ["--interleave"] if args.interleave else []
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        if args.profile and i == 0:
            print("\n".join(ln for ln in stdout.splitlines() if not ln.startswith(PREFIX)), flush=True)
        took.append(time.perf_counter() - t0)
        lines = [ln for ln in stdout.splitlines() if ln.startswith(PREFIX)]
        if rc != 0 or not lines:
            print(f"p{i}: FAILED rc={rc}\n{stderr[-3000:]}", flush=True)
            continue
        run = json.loads(lines[-1].removeprefix(PREFIX))
        runs.append(run)
        if sink is not None:
            sink.write(lines[-1] + "\n")
            sink.flush()
        b = {v: min(run["decode"][v]) for v in DECODE if v in run["decode"]}
        print(
            f"p{i} done in {took[-1]:.0f} s, order {run['order']}, compile {run['compile_s']}, best us/request "
            + " ".join(f"{v} {t:.1f}" for v, t in b.items())
            + f"; {_load()}",
            flush=True,
        )
    if sink is not None:
        sink.close()
    if runs:
        _aggregate(runs, args.boot, header)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--device", default="cuda" if shutil.which("nvidia-smi") else "cpu")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--vocab", type=int, default=0, help="append an LM head Linear(hidden, vocab): logits output")
    ap.add_argument("--decode-steps", type=int, default=64, help="compiled calls per decode-like request")
    ap.add_argument("--reqs", type=int, default=20, help="requests per variant per round")
    ap.add_argument("--rounds", type=int, default=15, help="timed rounds per process")
    ap.add_argument("--warmup-rounds", type=int, default=2)
    ap.add_argument("--burst", type=int, default=32, help="calls per burst in the per-call timing")
    ap.add_argument("--bursts", type=int, default=10, help="bursts per variant per round")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads on CPU")
    ap.add_argument("--seed", type=int, default=0, help="process i draws its orders from seed and i")
    ap.add_argument(
        "--mode",
        default="default",
        choices=("default", "reduce-overhead", "max-autotune-no-cudagraphs"),
        help="torch.compile mode of every variant (reduce-overhead: CUDA graphs, as decode is usually served)",
    )
    ap.add_argument("--procs", type=int, default=8, help="fresh processes, run one after another")
    ap.add_argument("--budget-s", type=float, default=0.0, help="launch no process that may end past this")
    ap.add_argument("--fresh-cache", action="store_true", help="empty Inductor/Triton caches per process")
    ap.add_argument("--jsonl", default="", help="append each process's JSON line to this file")
    ap.add_argument("--from-jsonl", nargs="+", default=[], help="aggregate saved JSON lines (files); run nothing")
    ap.add_argument("--boot", type=int, default=10_000, help="bootstrap resamples")
    ap.add_argument("--profile", action="store_true", help="the first process also prints torch.profiler tables")
    ap.add_argument("--diagnose", action="store_true", help="add variants and timings that split the SDK's cost")
    ap.add_argument("--no-control", action="store_true", help="no A/A control artifact (one compile fewer)")
    ap.add_argument(
        "--aa",
        action="store_true",
        help="add plain_aa: the plain callable again as a variant of its own (a true A/A per process: the noise "
        "floor of each process's figure, printed beside the targets)",
    )
    ap.add_argument(
        "--fork",
        action="store_true",
        help="fork each worker from a parent that imported torch and the SDK once (fresh device context, "
        "compile state and caches in memory; saves the imports per process)",
    )
    ap.add_argument(
        "--pin",
        default="",
        help="pin every worker to these CPUs: 'auto' (two CPUs on the GPU's NUMA node) or a comma list; the "
        "per-process lines show where each one ran either way",
    )
    ap.add_argument(
        "--interleave",
        action="store_true",
        help="time every request alone, one request of each variant at a time in random order, each drained "
        "(flush, device sync) in its own time; per round the median request per variant",
    )
    ap.add_argument(
        "--blocks",
        type=int,
        default=0,
        help="with --interleave, also the throughput protocol: per round this many blocks of every variant, "
        "each --block-reqs requests back to back, flushed and synchronised once per block (the issue's figure)",
    )
    ap.add_argument("--block-reqs", type=int, default=6, help="requests per block of the throughput protocol")
    ap.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.blocks and not args.interleave:
        ap.error("--blocks runs beside --interleave's request protocol: add --interleave")
    args.pin_cpus = pin_cpus(args.pin)
    if args.worker >= 0:
        _worker(args)
    else:
        _parent(args)


if __name__ == "__main__":
    main()
