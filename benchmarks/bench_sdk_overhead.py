"""Host-SDK overhead: per compiled-graph call and per request, instrumented vs plain on the same model in
one run, against torch.profiler enabled, and process memory over many requests.

    .venv/bin/python benchmarks/bench_sdk_overhead.py                  # CPU, small MLP
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_sdk_overhead.py --served gpt2   # CPU, served model
    .venv/bin/python benchmarks/bench_sdk_overhead.py --served demo    # CPU, the demo's decoder
    .venv/bin/python benchmarks/bench_sdk_overhead.py --hooks --served demo --calls 20000   # SDK code paths
    python benchmarks/bench_sdk_overhead.py --device cuda --hidden 4096 --layers 4 --tokens 8   # decode-sized
    python benchmarks/bench_sdk_overhead.py --device cuda --hidden 4096 --layers 4 --tokens 8 --vocab 32000 \
        --profile                                                       # + LM head, + where the time goes

``--served gpt2|demo`` runs only the served-model comparison: a GPT-2-sized Hugging Face model built from a
config (2 layers, width 64, vocabulary 1000, eager attention, no download) or the demo's TinyDecoder, one
whole-model call per request on a (2, 32) batch, plain ``torch.compile`` against ``tracker.compile`` with the
fingerprint on at its default, timed request by request in interleaved pairs (which goes first alternates);
per round the ratio of medians, then the median and range over rounds, the per-pair median ratio, the SDK
background thread's CPU per request (its own thread clock) and the other threads', and the fingerprint's
serving-thread and background costs; then per round ``--pairs`` requests of each in back-to-back blocks of
``--block``, plain and instrumented alternating (the flush at the end of each instrumented block included:
throughput, where the SDK's held outputs and background work fall on instrumented requests alone; short
alternating blocks so that a load change on a shared machine falls on both).

``--hooks`` times the SDK's own code paths in thread CPU time, which other load on the machine moves little:
the request scope with ``set_output`` on the served model's output, the per compiled-graph call wrapper and
the guard hook, and the background thread's record building per request.

Sections otherwise: per compiled-graph call; per request with one call; the output fingerprint alone (fused Triton
kernel vs the torch ops vs the previous twelve-op version, serving-thread time and time to completion);
decode-like requests (``--decode-steps`` calls per request) plain vs instrumented without and with the
fingerprint; in both timed sections an A/A control (a second plain callable on a copy of the model) whose
difference from plain is the noise floor the instrumented figures must be read against; RSS over
``--memory-requests`` requests. Every figure line ends with the load average.

Prints figures; asserts nothing. The exporter is the null exporter so the figures are the SDK's own cost
(hooks on the serving thread plus the background thread's record building competing for the GIL);
``--served ... --exporter otlp`` puts the product's export path in instead (the real OtlpExporter: records
encoded in batches as OTLP/HTTP protobuf by its own encoder and POSTed over loopback to a receiver subprocess
that answers 200), its export thread's CPU charged to the instrumented requests.

One process compares callables whose placement and compile order can move throughput by more than the
SDK's 1 %, and the A/A control here is not a second compile: Dynamo reuses plain's graph for the copy
(its guards do not pin the module instance; seen on torch 2.13), so it differs from plain in its weight
copy only. bench_sdk_study.py repeats the decode-like and per-call comparisons in many fresh processes in
random orders, with a control compiled apart and a same-artifact comparison.

Recorded results for the output fingerprint (collector/host/fingerprint.py), on an H200 (torch 2.11,
Triton 3.6): splitting rows over about TARGET_PROGRAMS programs instead of one program per row took the
kernel from 16.7 to 2.6 us of device time for 8x32000 bf16 logits, from 61.5 to 2.3 us for 1x128256 and
from 18.3 to 14.9 us for 256x32000; serving-thread time per ``set_output`` for 8x32000 bf16 is about
7.6 us with the static launcher and no per-request CUDA event, against about 35 us with a per-request
event and Triton's launch path, and about 450 us for the first twelve-op version.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch

from inferensics.collector.host import InductorBackend, NullExporter, SdkConfig, Tracker, instrument
from inferensics.collector.host import fingerprint as fpmod


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _rss_mib() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _time_per(fn: Callable[[], Any], n: int, device: str, after: Callable[[], Any] | None = None) -> float:
    """Wall time per ``fn`` call; ``after`` (the tracker's flush) runs inside the timed region, so the
    background work left over at the end of a round is counted too."""
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    if after is not None:
        after()
    _sync(device)
    return (time.perf_counter() - t0) / n * 1e6


def _pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.2f} %"


def _load() -> str:
    return "load avg " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def _legacy_fingerprint(output: torch.Tensor) -> Any:
    """The previous fingerprint (commit d04d24d): twelve small ops, two pinned copies, one event; the peer."""
    x = output.detach()
    xf = x.float()
    finite = torch.isfinite(xf)
    z = torch.where(finite, xf, torch.zeros((), dtype=xf.dtype, device=xf.device))
    stats = torch.stack(
        [
            torch.isnan(xf).sum().to(torch.float64),
            torch.isinf(xf).sum().to(torch.float64),
            finite.sum().to(torch.float64),
            z.sum(dtype=torch.float64),
            (z.double() * z.double()).sum(),
            z.abs().max().to(torch.float64),
        ]
    )
    argmax = x.argmax(dim=-1).flatten()
    if x.device.type != "cuda":
        return stats, argmax
    hs = torch.empty(stats.numel(), dtype=stats.dtype, pin_memory=True)
    ha = torch.empty(argmax.numel(), dtype=argmax.dtype, pin_memory=True)
    hs.copy_(stats, non_blocking=True)
    ha.copy_(argmax, non_blocking=True)
    event = torch.cuda.Event()  # type: ignore[no-untyped-call]
    event.record()
    return hs, ha, event


def _fp_path(dtype: torch.dtype, dev: str) -> str:
    if dev != "cuda":
        return "numpy passes on the SDK background thread (CPU: the serving thread keeps a reference)"
    if dtype in fpmod.KERNELS.zero_copy:
        return "fused Triton kernel writing pinned host memory (zero-copy)"
    if dtype in fpmod.KERNELS.ready:
        return "fused Triton kernel + one device-to-host copy"
    return f"torch ops ({fpmod.KERNELS.failed or 'kernel not ready'})"


def _fingerprint_variants(y: torch.Tensor, dev: str, n: int, rounds: int) -> None:
    """Serving-thread time (host loop, no sync) and time to completion (synced) of each fingerprint path."""
    x2 = y.reshape(-1, y.shape[-1])
    variants: dict[str, Callable[[], Any]] = {
        "previous 12-op": partial(_legacy_fingerprint, y),
        "torch ops (rows)": partial(fpmod.row_stats_torch, x2),
    }
    if dev == "cuda":
        t0 = time.perf_counter()
        fpmod.start_fingerprint(y).result()
        while y.dtype not in fpmod.KERNELS.ready and not fpmod.KERNELS.failed and time.perf_counter() - t0 < 120:
            time.sleep(0.05)
        state = "ready" if y.dtype in fpmod.KERNELS.ready else f"NOT ready ({fpmod.KERNELS.failed or 'timeout'})"
        print(f"fused Triton kernel for {y.dtype}: {state} after {time.perf_counter() - t0:.1f} s (background compile)")
        if y.dtype in fpmod.KERNELS.ready:
            variants["fused Triton kernel"] = partial(fpmod.launch_kernel, fpmod.KERNELS.kernel, x2)
            ref = fpmod.row_stats_torch(x2).cpu()
            parts = fpmod.launch_kernel(fpmod.KERNELS.kernel, x2).cpu().numpy()
            got = torch.from_numpy(parts)  # per-row numbers: the kernel folds a row's spans itself
            same = torch.equal(ref[:, [0, 1, 4, 5]], got[:, [0, 1, 4, 5]])
            print(
                f"fused kernel vs torch ops on this output: counts/absmax/argmax equal {same}, "
                f"max |sum diff| {(ref[:, 2:4] - got[:, 2:4]).abs().max().item():.3g}"
            )
    variants["start_fingerprint (SDK path)"] = partial(fpmod.start_fingerprint, y)
    print(f"fingerprint of {tuple(y.shape)} {y.dtype}, {rounds} rounds x {n}, best round:")
    for name, fn in variants.items():
        host, total = [], []
        for _ in range(rounds):
            _sync(dev)
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            _sync(dev)
            t2 = time.perf_counter()
            host.append((t1 - t0) / n * 1e6)
            total.append((t2 - t0) / n * 1e6)
        print(
            f"  {name:30s} serving thread {min(host):8.2f} us/call, to completion {min(total):8.2f} us/call  "
            f"({_load()})"
        )


def decode_model(args: argparse.Namespace) -> tuple[torch.nn.Module, torch.Tensor]:
    """The benchmark model (``--layers`` × Linear(``--hidden``)+GELU, an optional LM head of ``--vocab``)
    in ``--dtype`` on ``--device`` with weights seeded 0, and an input of ``--tokens`` rows. The weights are
    drawn on the device itself (a decode-sized model's 200M parameters took a second to draw on the host)."""
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    with torch.device(args.device):
        for _ in range(args.layers):
            layers += [torch.nn.Linear(args.hidden, args.hidden), torch.nn.GELU()]
        if args.vocab:
            layers.append(torch.nn.Linear(args.hidden, args.vocab))
    dtype = getattr(torch, args.dtype)
    model = torch.nn.Sequential(*layers).to(args.device, dtype).eval()
    return model, torch.randn(args.tokens, args.hidden, device=args.device, dtype=dtype)


def _one_request(tracker: Tracker, fn: Callable[[torch.Tensor], Any], x: torch.Tensor, ids: Iterator[int]) -> None:
    with tracker.request(f"r{next(ids)}", shape=tuple(x.shape)):
        fn(x)


def decode_plain(fn: Callable[[torch.Tensor], Any], x: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        y = fn(x)
    del y


def decode_instr(
    tracker: Tracker,
    fn: Callable[[torch.Tensor], Any],
    x: torch.Tensor,
    steps: int,
    ids: Iterator[int],
    *,
    fingerprint: bool = True,
) -> None:
    with tracker.request(f"d{next(ids)}", shape=tuple(x.shape)) as req:
        for _ in range(steps):
            y = fn(x)
        if fingerprint:
            req.set_output(y)


def _profile(tracker: Tracker, fn: Callable[[torch.Tensor], Any], x: torch.Tensor, steps: int, dev: str) -> None:
    """torch.profiler over a few instrumented decode-like requests: where serving-thread and GPU time go."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if dev == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    ids = iter(range(10**9))
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(5):
            decode_instr(tracker, fn, x, steps, ids)
        _sync(dev)
    tracker.flush()
    print("profile of 5 instrumented decode-like requests, top ops by self CPU time:")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=48))
    if dev == "cuda":
        print("top ops by device time:")
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=10, max_name_column_width=48))


def served_model(name: str, batch: int, seq: int) -> tuple[torch.nn.Module, torch.Tensor]:
    """The served-model comparison's model and input (built from a config; nothing is downloaded)."""
    torch.manual_seed(0)
    if name == "gpt2":
        import transformers

        cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128)
        cfg._attn_implementation = "eager"
        model: torch.nn.Module = transformers.GPT2LMHeadModel(cfg).eval()
        vocab = cfg.vocab_size
    else:
        from inferensics.demo.models.decoder import DecoderConfig, TinyDecoder

        model = TinyDecoder(DecoderConfig()).eval()
        vocab = DecoderConfig().vocab_size
    return model, torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))


def _spread(values: list[float]) -> str:
    """``+m % [lo, hi]`` of ratios: the median and range over rounds, as added percent."""
    return (
        f"{(statistics.median(values) - 1) * 100:+.2f} % [{(min(values) - 1) * 100:+.2f}, "
        f"{(max(values) - 1) * 100:+.2f}]"
    )


_SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real OTLP receiver
    def log_message(self, *a):
        pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def do_PUT(self):  # the blob API (output code at compile time)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

import os, threading
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()  # ends with the bench
server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)  # spans and blobs on two connections
print(server.server_address[1], flush=True)
server.serve_forever()
"""
"""An OTLP/HTTP receiver that reads each export and answers 200 (an empty ExportTraceServiceResponse), run
as a subprocess: its CPU is the receiver's, not the SDK's, and stays out of this process's clocks."""


def _otlp_sink() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", _SINK], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    if not port.isdigit():
        proc.kill()
        raise SystemExit(f"the OTLP sink did not start (printed {port!r})")
    return proc, f"http://127.0.0.1:{port}"


def _exporter(kind: str) -> tuple[Any, subprocess.Popen[str] | None]:
    """The exporter of ``--exporter``: the null exporter, or the product's OtlpExporter (OTLP/HTTP protobuf
    in batches) over loopback to :data:`_SINK`."""
    if kind == "null":
        return NullExporter(), None
    from inferensics.collector.host.otlp_exporter import OtlpExporter

    proc, url = _otlp_sink()
    return OtlpExporter(url, host="bench"), proc


def _served_pair(args: argparse.Namespace, exporter: Any) -> tuple[torch.Tensor, Any, Tracker, Any]:
    """The served model's input, its plain ``torch.compile`` (the peer), and a tracker on ``exporter`` with the
    same model compiled through it: ``(x, plain, tracker, instrumented)``."""
    name = args.served or "demo"
    model, x = served_model(name, 2, 32)
    tracker = instrument(
        exporter=exporter, host="bench", model=name, config=SdkConfig(fingerprint_rate=args.fingerprint_rate)
    )
    return x, torch.compile(model), tracker, tracker.compile(model, name=name)


def run_served(args: argparse.Namespace) -> None:
    """Plain against instrumented requests of a served model, interleaved pair by pair, then in blocks."""
    exporter, sink = _exporter(args.exporter)
    x, plain, tracker, instrumented = _served_pair(args, exporter)
    ids = iter(range(10**9))
    clock = time.thread_time_ns

    def req_plain() -> tuple[int, int]:
        c0, t0 = clock(), time.perf_counter_ns()
        plain(x)
        return time.perf_counter_ns() - t0, clock() - c0

    shape = tuple(x.shape)

    def req_instr() -> tuple[int, int]:
        # A server has its request's id and shape before the SDK sees them: made before the clocks start.
        rid = f"r{next(ids)}"
        c0, t0 = clock(), time.perf_counter_ns()
        with tracker.request(rid, shape=shape) as req:
            req.set_output(instrumented(x))
        return time.perf_counter_ns() - t0, clock() - c0

    with torch.no_grad():
        for _ in range(20):
            req_plain()
            req_instr()
        tracker.flush()
        out = plain(x)
        logits = out.logits if hasattr(out, "logits") else out
        rows = logits.reshape(-1, logits.shape[-1])
        fp_us = _time_per(lambda: fpmod.start_fingerprint(logits), 200, "cpu")
        bg_fp_us = _time_per(lambda: fpmod.cpu_fingerprint(rows, True, 16), 200, "cpu")
        ref_fp_us = _time_per(lambda: fpmod.row_stats_torch(rows), 200, "cpu")
        rules = (tracker.fingerprint_cpu.rate, tracker.fingerprint_device.rate)
        print(
            f"torch {torch.__version__}, cpu ({torch.get_num_threads()} intra-op threads), served {args.served}, "
            f"input {tuple(x.shape)}, logits {tuple(logits.shape)}, fingerprint rate {rules[0]:g} for CPU outputs "
            f"({'SDK default' if args.fingerprint_rate is None else '--fingerprint-rate'}), {args.pairs} pairs x "
            f"{args.rounds} rounds, exporter {args.exporter}; {_load()}"
        )
        wall: list[float] = []  # per round: ratio of median wall times, instrumented / plain
        cpu: list[float] = []  # the same in serving-thread CPU time
        charged: list[float] = []  # serving-thread CPU + the SDK's background CPU per request, / plain's
        pair_ratios: list[float] = []
        block_ratios: list[float] = []
        bg: list[float] = []
        others: list[float] = []
        sdk_clock = time.pthread_getcpuclockid(tracker.pipeline._thread.ident or 0)
        for r in range(args.rounds):
            tp: list[tuple[int, int]] = []
            ti: list[tuple[int, int]] = []
            p0, t0, s0 = time.process_time(), time.thread_time(), time.clock_gettime(sdk_clock)
            for i in range(args.pairs):
                if i % 2:
                    tp.append(req_plain())
                    ti.append(req_instr())
                else:
                    ti.append(req_instr())
                    tp.append(req_plain())
            f0 = clock()
            tracker.flush()  # what the background thread had not done yet, done here: charged to the SDK
            flush_ns = clock() - f0
            sdk = time.clock_gettime(sdk_clock) - s0
            # The process's other threads: OpenTelemetry's export thread under --exporter otlp (encoding and
            # posting the spans: the SDK's export path), nothing measurable under the null exporter.
            others.append(((time.process_time() - p0) - (time.thread_time() - t0) - sdk) / args.pairs * 1e6)
            bg_us = (sdk + flush_ns / 1e9) / args.pairs * 1e6 + max(others[-1], 0.0)
            bg.append(bg_us)
            mp, mi = statistics.median(w for w, _ in tp), statistics.median(w for w, _ in ti)
            cp, ci = statistics.median(c for _, c in tp) / 1e3, statistics.median(c for _, c in ti) / 1e3
            wall.append(mi / mp)
            cpu.append(ci / cp)
            charged.append((ci + bg_us) / cp)
            pair_ratios.extend(b[0] / a[0] for a, b in zip(tp, ti, strict=True))
            # Blocks: a server runs instrumented requests back to back, so each one's output is allocated
            # while the SDK may still hold earlier ones, and the background thread's work falls on them
            # alone. Pairs hide both (a plain request beside each frees its memory and shares the cost).
            # Blocks of --block requests, plain and instrumented alternating (which goes first alternates by
            # round), --pairs requests of each in all: a load change on a shared machine falls on both.
            blocks = {"plain": 0, "instr": 0}
            size = max(1, min(args.block, args.pairs))
            for b in range(max(1, args.pairs // size)):
                for name in ("plain", "instr") if (r + b) % 2 else ("instr", "plain"):
                    rids = [f"b{next(ids)}" for _ in range(size)]
                    t0 = time.perf_counter_ns()
                    for rid in rids:
                        if name == "plain":
                            plain(x)
                        else:
                            with tracker.request(rid, shape=shape) as req:
                                req.set_output(instrumented(x))
                    if name == "instr":
                        tracker.flush()
                    blocks[name] += time.perf_counter_ns() - t0
            block_ratios.append(blocks["instr"] / blocks["plain"])
            n_block = size * max(1, args.pairs // size)
            print(
                f"  round {r}: pairs: plain {mp / 1e3:.1f} us, instrumented {mi / 1e3:.1f} us "
                f"({(mi / mp - 1) * 100:+.2f} %); serving-thread CPU plain {cp:.1f} us, instrumented {ci:.1f} us "
                f"({(ci / cp - 1) * 100:+.2f} %), "
                f"+ background and export threads {bg_us:.1f} us ({(charged[-1] - 1) * 100:+.2f} %); "
                f"blocks of {size}: plain "
                f"{blocks['plain'] / n_block / 1e3:.1f} us/request, instrumented (flush included) "
                f"{blocks['instr'] / n_block / 1e3:.1f} ({(block_ratios[-1] - 1) * 100:+.2f} %); {_load()}"
            )
    print(f"SDK-added time per request, median over {args.rounds} rounds [range over rounds]:")
    print(
        f"  interleaved pairs, wall time (ratio of medians): {_spread(wall)}; per-pair median ratio "
        f"{(statistics.median(pair_ratios) - 1) * 100:+.2f} %; {_load()}"
    )
    print(f"  interleaved pairs, serving-thread CPU time: {_spread(cpu)}")
    print(
        f"  interleaved pairs, serving-thread CPU + the SDK background thread's CPU (and the end-of-round flush) "
        f"charged to each instrumented request: {_spread(charged)}  <- the honest per-request figure"
    )
    print(f"  back-to-back blocks, wall time (throughput, the flush included): {_spread(block_ratios)}; {_load()}")
    print(
        f"  SDK background and export CPU {statistics.median(bg):.1f} us/request [{min(bg):.1f}, {max(bg):.1f}] "
        f"(the SDK thread's own clock plus the flush, per pair, plus the other threads of the process: "
        f"{statistics.median(others):.1f}); serving-thread start_fingerprint {fp_us:.1f} us; "
        f"background fingerprint of one output {bg_fp_us:.1f} us (the reference torch ops: {ref_fp_us:.1f} us), "
        f"taken for {rules[0]:g} of requests; fingerprint path: {_fp_path(torch.float32, 'cpu')}"
    )
    tracker.shutdown()
    if sink is not None:
        sink.kill()
        sink.wait()
    print("stats:", {k: v for k, v in tracker.stats().items() if v})


def run_hooks(args: argparse.Namespace) -> None:
    """The SDK's own code paths timed in isolation, in thread CPU time (robust to other load): the
    request scope with ``set_output`` on the served model's output, the per compiled-graph call wrapper
    and the guard hook, and the background thread's record building per request (drained here)."""
    from inferensics.collector.host import backend
    from inferensics.collector.host.dynamo_hooks import guard_hook

    model, x = served_model(args.served or "demo", 2, 32)
    with torch.no_grad():
        out = model(x)
    logits = out.logits if hasattr(out, "logits") else out
    config = SdkConfig(health_interval_s=0, fingerprint_rate=args.fingerprint_rate)
    tracker = instrument(exporter=NullExporter(), host="bench", model="hooks", config=config)
    n, rounds = args.calls, args.rounds
    shape = tuple(x.shape)
    # The background thread is stopped: its work is done below by this thread, timed apart.
    tracker.pipeline._stop.set()
    tracker.pipeline._thread.join()

    def scopes(fingerprint: bool) -> tuple[float, float]:
        """Serving-thread CPU µs per request scope, then the background CPU µs to build its record."""
        t0 = time.thread_time_ns()
        for i in range(n):
            with tracker.request(f"h{i}", shape=shape) as req:
                if fingerprint:
                    req.set_output(logits)
        serving = (time.thread_time_ns() - t0) / n / 1e3
        t0 = time.thread_time_ns()
        tracker.pipeline.drain()
        return serving, (time.thread_time_ns() - t0) / n / 1e3

    def identity(*a: Any) -> Any:
        return a

    wrapped = backend._counting(identity, backend.GraphSlot(0, "0/0"))

    def per_call(fn: Callable[..., Any], in_request: bool, arg: Any = x) -> float:
        scope = tracker.request("calls") if in_request else None
        if scope is not None:
            scope.__enter__()
        t0 = time.thread_time_ns()
        for _ in range(n):
            fn(arg)
        us = (time.thread_time_ns() - t0) / n / 1e3
        if scope is not None:
            scope.__exit__(None, None, None)
        return us

    rows: dict[str, list[float]] = {k: [] for k in ("scope", "scope_fp", "bg", "bg_fp", "call", "wrapped", "guard")}
    for _ in range(rounds):
        a, b = scopes(False)
        rows["scope"].append(a)
        rows["bg"].append(b)
        a, b = scopes(True)
        rows["scope_fp"].append(a)
        rows["bg_fp"].append(b)
        rows["call"].append(per_call(identity, True))
        rows["wrapped"].append(per_call(wrapped, True))
        rows["guard"].append(per_call(guard_hook, True, True))
    rate = tracker.fingerprint_cpu.rate
    tracker.shutdown()
    best = {k: min(v) for k, v in rows.items()}
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(
        f"SDK code paths alone, thread CPU time, {rounds} rounds x {n}, best round (median round), "
        f"output {tuple(logits.shape)}; {_load()}"
    )
    print(
        f"  serving thread per request: scope {best['scope']:.2f} us ({med['scope']:.2f}); scope + set_output "
        f"{best['scope_fp']:.2f} us ({med['scope_fp']:.2f})"
    )
    print(
        f"  serving thread per compiled-graph call in a request: counting wrapper "
        f"{best['wrapped'] - best['call']:+.2f} us ({med['wrapped'] - med['call']:+.2f}); guard hook "
        f"{best['guard']:.2f} us ({med['guard']:.2f}) (a bare Python call: {best['call']:.2f} us)"
    )
    print(
        f"  background thread per request (record building): {best['bg']:.2f} us ({med['bg']:.2f}); with "
        f"set_output, fingerprinting {rate:g} of the requests: {best['bg_fp']:.2f} us ({med['bg_fp']:.2f}); {_load()}"
    )


def run_segments(args: argparse.Namespace) -> None:
    """The SDK's serving-thread steps timed in place: each right after a plain request of the served model
    (which leaves the caches, TLBs and branch predictors to the model, as in a server), so each step pays
    what it pays between two model runs, several times what it costs in a loop (``--hooks``). Per step, the
    median over ``--pairs`` requests a round: ``tracker.request()``, ``__enter__``, the instrumented call in
    the scope less the same call outside any scope (interleaved), ``set_output``, ``__exit__``. Only the
    public API is timed, so the same command measures another checkout (``PYTHONPATH``) as the peer."""
    x, plain, tracker, instrumented = _served_pair(args, NullExporter())
    clock = time.perf_counter_ns
    shape = tuple(x.shape)
    names = ("request", "enter", "call_in_scope", "set_output", "exit", "call_outside")
    rounds: dict[str, list[float]] = {k: [] for k in (*names, "total")}
    with torch.no_grad():
        for _ in range(20):
            plain(x)
            with tracker.request("warm", shape=shape) as req:
                req.set_output(instrumented(x))
            instrumented(x)
        tracker.flush()
        n = 0
        for _ in range(args.rounds):
            t: dict[str, list[int]] = {k: [] for k in names}
            for _ in range(args.pairs):
                n += 1
                rid = f"s{n}"
                plain(x)
                t0 = clock()
                scope = tracker.request(rid, shape=shape)
                t1 = clock()
                scope.__enter__()
                t2 = clock()
                y = instrumented(x)
                t3 = clock()
                scope.set_output(y)
                t4 = clock()
                scope.__exit__(None, None, None)
                t5 = clock()
                plain(x)
                t6 = clock()
                instrumented(x)
                t7 = clock()
                for k, v in zip(names, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t7 - t6), strict=True):
                    t[k].append(v)
            tracker.flush()
            med = {k: statistics.median(v) / 1e3 for k, v in t.items()}
            for k in names:
                rounds[k].append(med[k])
            total = med["request"] + med["enter"] + med["set_output"] + med["exit"] + med["call_in_scope"]
            rounds["total"].append(total - med["call_outside"])
    tracker.shutdown()
    print(
        f"SDK serving-thread steps in place (after a plain request each), served {args.served or 'demo'}, "
        f"{args.pairs} requests x {args.rounds} rounds, median over rounds [range] of each round's median, us; "
        f"{_load()}"
    )
    for k in ("request", "enter", "set_output", "exit"):
        print(f"  {k:>12}: {statistics.median(rounds[k]):6.2f} [{min(rounds[k]):.2f}, {max(rounds[k]):.2f}]")
    delta = [a - b for a, b in zip(rounds["call_in_scope"], rounds["call_outside"], strict=True)]
    print(
        f"  the call in the scope less outside: {statistics.median(delta):+6.2f} "
        f"[{min(delta):+.2f}, {max(delta):+.2f}] (outside: {statistics.median(rounds['call_outside']):.1f})"
    )
    print(
        f"  serving path per request: {statistics.median(rounds['total']):6.2f} "
        f"[{min(rounds['total']):.2f}, {max(rounds['total']):.2f}]; {_load()}"
    )
    print("stats:", {k: v for k, v in tracker.stats().items() if v})


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
    ap.add_argument("--vocab", type=int, default=0, help="append an LM head Linear(hidden, vocab): logits output")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--profile", action="store_true", help="print a torch.profiler table of decode-like requests")
    ap.add_argument("--served", choices=("gpt2", "demo"), help="only the served-model comparison (CPU)")
    ap.add_argument(
        "--segments", action="store_true", help="--served: the SDK's serving-thread steps, each timed in place"
    )
    ap.add_argument("--pairs", type=int, default=400, help="interleaved request pairs per round (--served)")
    ap.add_argument(
        "--block", type=int, default=50, help="requests per back-to-back block, plain and SDK alternating (--served)"
    )
    ap.add_argument(
        "--exporter",
        choices=("null", "otlp"),
        default="null",
        help="--served: the null exporter (the SDK's own cost), or the real OtlpExporter over loopback to a "
        "receiver subprocess that answers 200 (the product's export path)",
    )
    ap.add_argument(
        "--hooks", action="store_true", help="only the SDK's code paths in thread CPU time (robust to load)"
    )
    ap.add_argument(
        "--fingerprint-rate",
        type=float,
        default=None,
        help="SdkConfig.fingerprint_rate for --served/--hooks (default: the SDK's, 1/32 for CPU outputs)",
    )
    args = ap.parse_args()
    if args.hooks:
        torch.set_num_threads(args.threads)
        run_hooks(args)
        return
    if args.served:
        torch.set_num_threads(args.threads)
        (run_segments if args.segments else run_served)(args)
        return
    dev = args.device
    if dev == "cpu":
        torch.set_num_threads(args.threads)
    model, x = decode_model(args)
    plain = torch.compile(model)
    # The A/A control: a copy of the model under torch.compile again. Dynamo reuses plain's graph for it
    # (seen on torch 2.13: no second compile), so its difference from ``plain`` is the noise floor of this
    # machine and of weight placement only; bench_sdk_study.py has a control compiled apart.
    control = torch.compile(copy.deepcopy(model))
    instrumented = torch.compile(model, backend=InductorBackend())
    with torch.no_grad():
        for _ in range(3):
            plain(x)
            control(x)
            instrumented(x)
    head = f" + Linear({args.hidden}, {args.vocab})" if args.vocab else ""
    print(
        f"torch {torch.__version__}, device {dev} ({torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}), "
        f"{args.layers}x Linear({args.hidden})+GELU{head}, {args.dtype}, input {tuple(x.shape)}; {_load()}"
    )

    # Interleaved rounds, minimum per variant: robust against other load on a shared machine. Wall time
    # measures the serving thread; process CPU time adds the SDK's background thread (GIL contention).
    keys = ("call_plain", "call_control", "call_plain_hooked", "call_instr", "req_plain", "req_instr", "req_prof")
    rows: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {"req_plain": [], "req_instr": []}
    n = args.calls
    counter = iter(range(10**9))
    with torch.no_grad():
        for _ in range(args.rounds):
            rows["call_plain"].append(_time_per(lambda: plain(x), n, dev))
            rows["call_control"].append(_time_per(lambda: control(x), n, dev))
            tracker = instrument(exporter=NullExporter(), host="bench", model="bench", config=SdkConfig())
            with tracker.request("calls"):
                rows["call_plain_hooked"].append(_time_per(lambda: plain(x), n, dev))
                rows["call_instr"].append(_time_per(lambda: instrumented(x), n, dev))
            c0 = time.process_time()
            one = partial(_one_request, tracker, instrumented, x, counter)
            rows["req_instr"].append(_time_per(one, n, dev, after=tracker.flush))
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
        f"added {added_call:+.2f} us; A/A control (second plain callable) {best['call_control']:.2f} us "
        f"({best['call_control'] - best['call_plain']:+.2f} us); {_load()}"
    )
    print(
        "  of which the guard hook (plain graph called inside a request): "
        f"{best['call_plain_hooked'] - best['call_plain']:+.2f} us"
    )
    print(
        f"per request (1 call):    plain {best['req_plain']:.2f} us, instrumented {best['req_instr']:.2f} us, "
        f"added {best['req_instr'] - best['req_plain']:+.2f} us ({_pct(best['req_instr'], best['req_plain'])}); "
        f"{_load()}"
    )
    print(
        f"process CPU per request: plain {best_cpu['req_plain']:.2f} us, instrumented {best_cpu['req_instr']:.2f} us "
        f"(includes the background thread building and exporting the record); {_load()}"
    )
    print(
        f"torch.profiler enabled:  {best['req_prof']:.2f} us per call "
        f"(added {best['req_prof'] - best['req_plain']:+.2f} us, {_pct(best['req_prof'], best['req_plain'])}); "
        f"{_load()}"
    )

    # The fingerprint alone, each implementation, on the model's real output.
    with torch.no_grad():
        _fingerprint_variants(plain(x), dev, n, args.rounds)

    # Decode-like requests: many compiled calls (tokens) per request, without and with the fingerprint.
    k = args.decode_steps
    reqs = max(n // k, 5)
    dec: dict[str, list[float]] = {
        "plain": [],
        "control": [],
        "instr_nofp": [],
        "instr": [],
        "fp_only": [],
        "bg_cpu": [],
    }
    with torch.no_grad():
        for _ in range(args.rounds):
            dec["plain"].append(_time_per(partial(decode_plain, plain, x, k), reqs, dev))
            dec["control"].append(_time_per(partial(decode_plain, control, x, k), reqs, dev))
            tracker = instrument(exporter=NullExporter(), host="bench", model="bench", config=SdkConfig())
            nofp = partial(decode_instr, tracker, instrumented, x, k, counter, fingerprint=False)
            dec["instr_nofp"].append(_time_per(nofp, reqs, dev, after=tracker.flush))
            # CPU of the process minus CPU of this (serving) thread: the SDK's background threads.
            p0, t0 = time.process_time(), time.thread_time()
            with_fp = partial(decode_instr, tracker, instrumented, x, k, counter)
            dec["instr"].append(_time_per(with_fp, reqs, dev, after=tracker.flush))
            dec["bg_cpu"].append(((time.process_time() - p0) - (time.thread_time() - t0)) / reqs * 1e6)
            with tracker.request("fp") as req:
                y = instrumented(x)
                dec["fp_only"].append(_time_per(partial(req.set_output, y), n, dev))
            tracker.shutdown()
    bd = {key: min(v) for key, v in dec.items()}
    md = {key: statistics.median(v) for key, v in dec.items()}
    print(
        f"decode-like request ({k} calls, {reqs} requests x {args.rounds} rounds, best round): "
        f"plain {bd['plain']:.1f} us; {_load()}"
    )
    print(
        f"  A/A control (second plain callable): {bd['control']:.1f} us ({_pct(bd['control'], bd['plain'])}); "
        f"medians: plain {md['plain']:.1f}, control {md['control']:.1f} ({_pct(md['control'], md['plain'])})"
    )
    print(
        f"  instrumented, no fingerprint:   {bd['instr_nofp']:.1f} us, added {bd['instr_nofp'] - bd['plain']:+.1f} us "
        f"({_pct(bd['instr_nofp'], bd['plain'])} throughput cost); medians: plain {md['plain']:.1f}, "
        f"instrumented {md['instr_nofp']:.1f} ({_pct(md['instr_nofp'], md['plain'])})"
    )
    print(
        f"  instrumented + fingerprint:     {bd['instr']:.1f} us, added {bd['instr'] - bd['plain']:+.1f} us "
        f"({_pct(bd['instr'], bd['plain'])} throughput cost); medians: {md['instr']:.1f} "
        f"({_pct(md['instr'], md['plain'])}); set_output alone {bd['fp_only']:.1f} us/call"
    )
    print(
        f"  background thread CPU per request (process minus serving thread; the final flush runs on the "
        f"serving thread and is not in it), best round: {bd['bg_cpu']:.1f} us; "
        f"fingerprint path: {_fp_path(x.dtype, dev)}"
    )
    if args.profile:
        tracker = instrument(exporter=NullExporter(), host="bench", model="bench", config=SdkConfig())
        with torch.no_grad():
            _profile(tracker, instrumented, x, k, dev)
        tracker.shutdown()

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
                    f"{(time.perf_counter() - t0) / i * 1e6:.1f} us/request incl. fingerprint; {_load()}"
                )
    tracker.shutdown()
    print("stats:", {k: v for k, v in tracker.stats().items() if v})


if __name__ == "__main__":
    main()
