"""Kernel benchmark: our Triton kernels against Inductor's code for the same op, SDPA and FlexAttention.

One call measures everything and prints one table: per op and shape, each provider's device time per call
(µs, median over rounds), the bandwidth it reaches (TB/s over the bytes the op must move), and its ratio
to our kernel (peer time / our time, so > 1 means ours is faster) with the spread over rounds and a
distribution-free 95 % confidence interval of the median per-round ratio (``ci``: order statistics of the
rounds' ratios; it narrows with ``--rounds``, so a cell whose interval spans 1.00 is a tie at this power). The
interval covers round-to-round noise only: two graphs of one and the same function, or the same kernel on another
allocation of its inputs, can differ by a few tenths of a percent with intervals that exclude 1.00 (session 15's
A/A controls, ``benchmarks/results/kernels-h200/session15_rows.md``), so a ratio within that of 1.00 is a tie. Each
provider's calls are captured in a CUDA graph (so launch overhead on the host is not measured) and the
rounds replay the graphs in a fresh random order each time, so clock or load drift falls on every
provider alike. Copy bandwidth (a device-to-device copy of 1 GiB) is measured in the same run.

Targets (issue 23): the four elementwise/norm kernels at >= 1.0x Inductor at every shape and >= 90 % of
copy bandwidth at 8192 tokens; paged decode attention >= 1.0x the fastest SDPA backend on the same KV stored
dense and >= 3x FlexAttention's paged path.

    python benchmarks/bench_kernels.py [--rounds 15] [--quick] [--only elementwise|attention] [--no-flex]
        [--flex-batches 1,8] [--batches 1,8] [--tokens 8,512] [--calls 20] [--json F]
    python benchmarks/bench_kernels.py --sweep [--rounds 5] [--write-tables kernels/_triton/h200_tables.json]
        [--only attention] [--batches 1,8] [--paged-configs "64,4,3,pf;64,4,4"] [--paged-waves 2,4,16]

``--sweep`` times candidate launch configurations of each kernel against its peer the same way (rows per
program / block / warps / fast division for the row kernels, step / warps / stages / split count / merge in the
last split or a second kernel for paged attention), checks each candidate's output first, and writes the fastest
per shape bucket as the launch tables the kernels use on compute capability 9.0 (a sweep writes only the parts it
ran: merge its rows into ``kernels/_triton/h200_tables.json`` by hand).

Needs a CUDA device. Every kernel is checked against the reference before it is timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F  # noqa: N812

from inferensics import kernels
from inferensics.kernels.samples import bytes_moved, make_args
from inferensics.kernels.tolerance import compare

Fn = Callable[[], Any]


def graphed(fn: Fn, calls: int) -> tuple[Fn, str]:
    """A callable replaying ``calls`` calls of ``fn`` from a CUDA graph (plain calls when capture fails)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
        return graph.replay, "graph"
    except Exception as exc:  # some peers cannot be captured; say so and time plain launches
        torch.cuda.synchronize()

        def loop() -> None:
            for _ in range(calls):
                fn()

        return loop, f"no graph ({type(exc).__name__})"


def measure(
    fns: dict[str, Fn], rounds: int, calls: int, rng: random.Random
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """µs per call of each provider per round (interleaved, shuffled each round)."""
    runners, modes = {}, {}
    for name, fn in fns.items():
        runners[name], modes[name] = graphed(fn, calls)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for run in runners.values():
        run()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {n: [] for n in fns}
    for _ in range(rounds):
        order = list(runners)
        rng.shuffle(order)
        for name in order:
            start.record()
            runners[name]()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) * 1000.0 / calls)
    return samples, modes


def copy_bandwidth(rounds: int, rng: random.Random) -> float:
    """TB/s of a 1 GiB device-to-device copy (bytes read + written)."""
    src = torch.empty(2**29, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    for _ in range(50):  # bring the clocks up from idle before timing
        dst.copy_(src)
    s, _ = measure({"copy": lambda: dst.copy_(src)}, rounds, 5, rng)
    return 2 * src.numel() * 2 / statistics.median(s["copy"]) / 1e6


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of ``values`` (independent rounds): the order
    statistics ``x(k), x(n+1-k)`` with the largest ``k`` whose binomial coverage is at least ``level`` (the
    sample's extremes when there are too few values for that)."""
    xs = sorted(values)
    n = len(xs)
    k, tail = 0, 0.0  # tail: P(Binomial(n, 1/2) <= k - 1), the chance the median lies below x(k)
    while k < n // 2:
        nxt = tail + math.comb(n, k) / 2.0**n
        if 2 * nxt > 1 - level:
            break
        k, tail = k + 1, nxt
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


class Table:
    """Collects rows and prints them aligned."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, **row: Any) -> None:
        self.rows.append(row)
        r = row
        ratio, ci = "", ""
        if r["ratio"] is not None:
            ratio = f"{r['ratio']:.3f}x [{r['ratio_lo']:.2f}-{r['ratio_hi']:.2f}]"
            ci = f"{r['ci_lo']:.3f}-{r['ci_hi']:.3f}"
        print(
            f"{r['op']:<24} {r['shape']:<34} {r['provider']:<18} {r['us']:>10.2f} {r['tb_s']:>7.2f} {ratio:>21} "
            f"{ci:>11}  {r['mode']}",
            flush=True,
        )


def header() -> None:
    print(f"{'op':<24} {'shape':<34} {'provider':<18} {'us':>10} {'TB/s':>7} {'peer/ours [min-max]':>21} "
          f"{'ci95':>11}  timing")  # fmt: skip


def report(  # noqa: PLR0917
    table: Table, op: str, label: str, samples: dict[str, list[float]], modes: dict[str, str], moved: int
) -> None:
    ours = samples.get("ours")
    for name, s in samples.items():
        med = statistics.median(s)
        ratios = [p / o for p, o in zip(s, ours, strict=True)] if ours and name != "ours" else None
        ci = median_ci(ratios) if ratios else (None, None)
        table.add(
            op=op, shape=label, provider=name, us=med, tb_s=moved / med / 1e6, mode=modes[name],
            ratio=statistics.median(ratios) if ratios else None,
            ratio_lo=min(ratios) if ratios else None, ratio_hi=max(ratios) if ratios else None,
            ci_lo=ci[0], ci_hi=ci[1], rounds=len(s),
        )  # fmt: skip


def check(op: str, out: Any, args: tuple[Any, ...]) -> str:
    """Verdict of our output against the reference (the op's rule for our provider's accuracy mode)."""
    reg = kernels.registry().op(op)
    rule = reg.tolerance.rule(args[0].dtype, reg.providers["triton"].requirements.accuracy)
    ref = reg.reference(*args)
    ref64 = None
    if rule.kind == "rmse":
        ref64 = reg.reference(
            *[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        )
    outs, refs = (out if isinstance(out, tuple) else (out,)), (ref if isinstance(ref, tuple) else (ref,))
    verdicts = [compare(o, r, rule, ref64) for o, r in zip(outs, refs, strict=True)]
    ok = all(v.passed for v in verdicts)
    return ("ok " if ok else "FAIL ") + rule.describe() + " · " + "; ".join(v.detail for v in verdicts)


def elementwise(table: Table, rounds: int, tokens: list[int], rng: random.Random, calls: int = 20) -> None:
    shapes = {
        "rms_norm": {"hidden": 4096},
        "fused_add_rms_norm": {"hidden": 4096},
        "silu_mul": {"hidden": 14336},
        "rotary_embedding": {"heads": 32, "head_dim": 128},
    }
    for op, extra in shapes.items():
        reg = kernels.registry().op(op)
        compiled = torch.compile(reg.reference, fullgraph=True, dynamic=False)
        for t in tokens:
            shape = {"tokens": t, **extra}
            args = make_args(op, shape, torch.bfloat16, torch.device("cuda"))
            ours = reg.providers["triton"].fn
            print(f"# {op} tokens={t}: {check(op, ours(*args), args)}", flush=True)
            moved = bytes_moved(op, args, reg.reference(*args))
            # The copy peer moves the same bytes (half read, half written) in the same rounds.
            src = torch.empty(moved // 4, dtype=torch.bfloat16, device="cuda").normal_()
            dst = torch.empty_like(src)
            fns: dict[str, Fn] = {
                "ours": functools.partial(ours, *args),
                "inductor": functools.partial(compiled, *args),
                "eager": functools.partial(reg.reference, *args),
                "copy": functools.partial(dst.copy_, src),
            }
            samples, modes = measure(fns, rounds, calls, rng)
            report(table, op, ",".join(f"{k}={v}" for k, v in shape.items()), samples, modes, moved)


def flex_paged(  # noqa: PLR0917
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    table: torch.Tensor,
    scale: float,
    kernel_options: dict[str, Any] | None = None,
) -> Fn:
    """FlexAttention's paged path (``torch.nn.attention.experimental._paged_attention``) over the same pages
    (``kernel_options`` passed to ``flex_attention``, e.g. forcing its non-decode kernel)."""
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    b, _, d = q.shape
    n_pages, page, hkv, _ = k_cache.shape
    k_cache, v_cache = k_cache.contiguous(), v_cache.contiguous()  # its physical KV is NHD (a copy if stored HND)
    per_seq = table.shape[1]
    pa = PagedAttention(n_pages, page, b, device="cuda")
    pa.page_table[:, :per_seq] = table.long()
    pa.physical_to_logical.scatter_(
        1, table.long(), torch.arange(per_seq, device="cuda").expand(b, per_seq).contiguous()
    )
    pa.capacity[:] = per_seq * page

    def full(b_: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return kv_idx >= 0

    logical = create_block_mask(full, b, None, 1, per_seq * page, device="cuda", BLOCK_SIZE=page)
    mask = pa.convert_logical_block_mask(logical)
    k_phys = k_cache.view(1, n_pages * page, hkv, d).transpose(1, 2)
    v_phys = v_cache.view(1, n_pages * page, hkv, d).transpose(1, 2)
    q4 = q.unsqueeze(2)
    # Each shape compiles anew; Dynamo's cache of flex_attention would hit its recompile limit (8) at the grid's
    # ninth cell and fall back to the eager kernel, which materialises the whole score matrix (batch 64 / 32k: 2 TiB).
    torch.compiler.reset()
    flex = torch.compile(flex_attention, dynamic=False)
    return lambda: flex(
        q4, k_phys, v_phys, block_mask=mask, scale=scale, enable_gqa=True, kernel_options=kernel_options
    )


def _flex_or_forced(  # noqa: PLR0917
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table: torch.Tensor, scale: float, label: str
) -> Fn:
    """Flex's paged path as it picks its kernel; where that fails (its decode kernel does not compile at batch 64,
    context 32k on torch 2.11), the same path with its non-decode kernel forced, said on a comment line."""
    try:
        flex = flex_paged(q, k_cache, v_cache, table, scale)
        flex()
        torch.cuda.synchronize()
        return flex
    except Exception as exc:
        print(f"# flex paged {label}: its own kernel choice failed ({type(exc).__name__}: "
              f"{str(exc).splitlines()[0][:100]}); timing it with kernel_options FORCE_USE_FLEX_ATTENTION")  # fmt: skip
        torch.cuda.empty_cache()
    flex = flex_paged(q, k_cache, v_cache, table, scale, {"FORCE_USE_FLEX_ATTENTION": True})
    flex()
    torch.cuda.synchronize()
    return flex


def _sdpa(backend: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)


def attention(
    table: Table,
    rounds: int,
    grid: list[tuple[int, int]],
    rng: random.Random,
    *,
    with_flex: bool = True,
    flex_batches: set[int] | None = None,
) -> None:
    from torch.nn.attention import SDPBackend

    reg = kernels.registry().op("paged_decode_attention")
    ours = reg.providers["triton"].fn
    for b, ctx in grid:
        shape = {"batch": b, "context": ctx, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page": 16}
        args = make_args("paged_decode_attention", shape, torch.bfloat16, torch.device("cuda"), seed=b + ctx)
        q, k_cache, v_cache, block_table, lens, scale = args
        lens.fill_(ctx)  # every sequence full: the dense peers attend to all of it
        if b * ctx <= 8 * 8192:
            print(f"# paged b={b} ctx={ctx}: {check('paged_decode_attention', ours(*args), args)}", flush=True)
        k_dense = k_cache[block_table.long()].reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        v_dense = v_cache[block_table.long()].reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        q4 = q.unsqueeze(2)
        fns: dict[str, Fn] = {"ours": functools.partial(ours, *args)}
        for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
            sdpa = functools.partial(_sdpa, backend, q4, k_dense, v_dense, scale)
            try:
                sdpa()
                torch.cuda.synchronize()
                fns[f"sdpa-{backend.name.split('_')[0].lower()}"] = sdpa
            except Exception as exc:
                print(f"# sdpa {backend.name} b={b} ctx={ctx}: unavailable ({type(exc).__name__}: {str(exc)[:80]})")
        try:
            if not with_flex:
                raise RuntimeError("skipped (--no-flex)")
            if flex_batches is not None and b not in flex_batches:
                raise RuntimeError(f"skipped (--flex-batches {','.join(map(str, sorted(flex_batches)))})")
            fns["flex-paged"] = _flex_or_forced(q, k_cache, v_cache, block_table, scale, f"b={b} ctx={ctx}")
        except Exception as exc:
            print(f"# flex paged b={b} ctx={ctx}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:100]})")
        samples, modes = measure(fns, rounds, 10, rng)
        moved = bytes_moved("paged_decode_attention", args, q)
        report(table, "paged_decode_attention", f"batch={b},context={ctx}", samples, modes, moved)
        fns.clear()
        torch.cuda.empty_cache()


def verdicts(table: Table, copy_tb_s: float) -> None:
    print("\n# targets")
    rows = table.rows
    for op in ("rms_norm", "fused_add_rms_norm", "silu_mul", "rotary_embedding"):
        vs = [r for r in rows if r["op"] == op and r["provider"] == "inductor"]
        if not vs:
            continue
        w = min(vs, key=lambda r: r["ratio"])
        worst = w["ratio"]
        # Below 1.00 by the median but with 1.00 inside the median's 95 % interval: not resolved at this power.
        verdict = "ok" if worst >= 1.0 else "MISS, tie: 95% CI spans 1.00" if w["ci_hi"] >= 1.0 else "MISS"
        big = [r for r in rows if r["op"] == op and r["provider"] == "copy" and "tokens=8192" in r["shape"]]
        # The copy row's ratio is copy time / our time over the same bytes: our fraction of copy bandwidth.
        frac = big[0]["ratio"] if big else float("nan")
        copy_verdict = "not run" if not big else "ok" if frac >= 0.9 else "MISS"
        print(f"{op:<24} vs inductor worst {worst:.3f}x (ci95 {w['ci_lo']:.3f}-{w['ci_hi']:.3f}, {w['shape']}, "
              f"{w['rounds']} rounds: {verdict}); 8192 tokens {frac:.0%} of same-bytes copy "
              f"({copy_verdict}; 1 GiB copy {copy_tb_s:.2f} TB/s)")  # fmt: skip
    att = {}
    for r in rows:
        if r["op"] == "paged_decode_attention":
            att.setdefault(r["shape"], {})[r["provider"]] = r
    for shape, rs in att.items():
        sdpa = [r["ratio"] for n, r in rs.items() if n.startswith("sdpa")]
        flex = rs.get("flex-paged")
        best = min(sdpa) if sdpa else float("nan")
        fr = flex["ratio"] if flex else float("nan")
        print(f"paged {shape:<26} vs fastest SDPA {best:.2f}x ({'ok' if best >= 1.0 else 'MISS'}); "
              f"vs flex paged {fr:.2f}x ({'ok' if fr >= 3.0 else 'MISS' if flex else 'n/a'})")  # fmt: skip


def _best(samples: dict[str, list[float]]) -> list[tuple[str, float]]:
    return sorted(((n, statistics.median(s)) for n, s in samples.items()), key=lambda x: x[1])


def _print_sweep(title: str, samples: dict[str, list[float]], peer: str, top: int = 8) -> None:
    ranked = _best(samples)
    peer_us = statistics.median(samples[peer])
    print(f"## {title}: {peer} {peer_us:.2f} us")
    for name, us in ranked[:top]:
        spread = (max(samples[name]) - min(samples[name])) / us if us else 0.0
        print(f"   {name:<34} {us:10.2f} us  {peer}/this {peer_us / us:5.2f}x  spread {spread:.0%}")


def silu_exhaustive_mismatches(dtype: torch.dtype, config: tuple[Any, ...]) -> int:
    """Elements where our SiLU·mul under ``config`` differs in bits from eager PyTorch, over every 16-bit gate
    value (up = 1 and up random; NaNs of either sign count as equal)."""
    from inferensics.kernels._triton import activation

    gate = torch.arange(-32768, 32768, dtype=torch.int32, device="cuda").to(torch.int16).view(dtype).reshape(256, 256)
    bad = 0
    for up in (torch.ones_like(gate), torch.randn(gate.shape, device="cuda").to(dtype)):
        x = torch.cat([gate, up], dim=-1)
        ours = activation.silu_mul_with(x, config)
        ref = kernels.registry().op("silu_mul").reference(x)
        same = (ours.view(torch.int16) == ref.view(torch.int16)) | (ours.isnan() & ref.isnan())
        bad += int((~same).sum().item())
    return bad


def guarded_fraction(x: torch.Tensor) -> float:
    """Fraction of 4-element groups of SiLU·mul's gates whose quotient falls in the guarded division's exact-path
    window (how often that path is taken on this data; the window tested on the float32 quotient)."""
    gate = x[..., : x.shape[-1] // 2].float()
    q = gate / (1.0 + torch.exp(-gate))
    low = (q.view(torch.int32) + 0x8008) & 0xFFFF
    near = (low <= 16) | ~(q.abs() >= 2.0**-56)
    return float(near.reshape(-1, 4).any(dim=1).float().mean().item())


def inductor_kernels(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, str]:
    """Run Inductor's compiled ``fn`` once; return its result and the Triton kernels (and launches) it generated."""
    import re

    try:
        from torch._inductor.utils import run_and_get_code

        out, codes = run_and_get_code(fn, *args)
    except Exception as exc:  # the code is a diagnostic: its absence must not stop the sweep
        return fn(*args), f"(no code: {type(exc).__name__}: {exc})"
    found: list[str] = []
    for code in codes:
        found += re.findall(r"(@triton\.jit\n.*?)'{3}", code, flags=re.S)
        found += re.findall(r"(\w+\.run\([^\n]*\))", code)
    return out, "\n".join(found) or "(no Triton kernel in the generated code)"


def _silu_configs() -> list[tuple[Any, ...]]:
    """SiLU·mul candidates: (BLOCK, warps, division, flat grid, 16-bit multiply, cache hints)."""
    legacy = [
        (1024, 8, 0, False, False, 0),
        (1024, 4, 0, False, False, 0),
        (2048, 8, 0, False, False, 0),
        (1024, 8, 1, False, False, 0),
        (1024, 4, 2, False, True, 0),
        (2048, 8, 2, False, True, 0),
    ]
    flat = [
        (1024, 4, 0, True, False, 0),
        (2048, 8, 0, True, False, 0),
        (1024, 4, 0, True, True, 0),
        (2048, 8, 0, True, True, 0),
        (1024, 4, 2, True, False, 0),
    ]
    guarded = [(b, w, 2, True, True, 0) for b, w in ((512, 4), (1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 8))]
    hinted = [(1024, 4, 2, True, True, 1), (1024, 4, 2, True, True, 2), (2048, 8, 2, True, True, 1)]
    # One wave at 8 tokens: short chains (Triton's own division, the hardware exp), small programs; each arithmetic
    # variant is timed only if the exhaustive check finds it exact.
    short = [
        (b, w, div, False, True, 0, fx)
        for b, w in ((512, 8), (256, 2), (256, 4))
        for div, fx in ((1, True), (3, False), (3, True))
    ]
    return legacy + flat + guarded + hinted + short  # fmt: skip


def row_candidates() -> dict[str, list[tuple[Any, ...]]]:
    """The sweep's candidate configurations per row op (see each kernel's config type for the fields)."""
    return {
        "rms_norm": [(1, 4, True, 0), (1, 8, True, 0), (1, 16, True, 0), (2, 16, True, 0), (1, 8, False, 0),
                     (1, 16, False, 0), (1, 16, True, 1)],
        "fused_add_rms_norm": [(1, 2, True, 0), (1, 4, True, 0), (1, 8, True, 0), (1, 16, True, 0), (2, 16, True, 0),
                               (1, 2, False, 0), (1, 8, False, 0), (1, 16, False, 0), (1, 2, True, 1),
                               (1, 16, True, 1), (1, 8, True, 1), (1, 16, False, 0, True)]
                              # the two-pass kernel: (1, warps, -, -, residual stored in pass 2?, chunk)
                              + [(1, w, False, 0, late, chunk) for chunk, w in ((1024, 4), (1024, 8), (2048, 8),
                                                                                (2048, 16), (4096, 16))
                                 for late in (False, True)],
        "silu_mul": _silu_configs(),
        "rotary_embedding": [(h, w, g) for h, w in ((4, 2), (4, 4), (8, 1), (8, 4), (32, 4), (32, 8))
                             for g in (False, True)] + [(16, 4, True), (8, 2, True)],
    }  # fmt: skip


def sweep_rows(
    rounds: int,
    tokens: list[int],
    rng: random.Random,
    tables: dict[str, Any],
    *,
    candidates: dict[str, list[tuple[Any, ...]]] | None = None,
    tokens_by_op: dict[str, list[int]] | None = None,
) -> None:
    """Time candidate launch configurations of the row kernels against Inductor and a same-bytes copy
    (CUDA-graph replays); the fastest per shape goes into ``tables`` (and a ``TABLE_ROW`` line, so a run cut
    short keeps what it chose). Every SiLU·mul arithmetic variant is checked exhaustively first and left out
    unless it matches eager PyTorch on every bfloat16 gate; each candidate's output is checked before timing.
    ``candidates`` (default :func:`row_candidates`) and ``tokens_by_op`` narrow the sweep to some ops/shapes."""
    from inferensics.kernels._triton import activation, norm, rotary

    cands = candidates if candidates is not None else row_candidates()

    def arithmetic(c: tuple[Any, ...]) -> tuple[int, bool, bool]:  # what decides SiLU·mul's bits
        cfg = activation.as_config(c)
        return cfg.div, cfg.native_mul, cfg.fast_exp

    exact: dict[tuple[int, bool, bool], bool] = {}
    for div, native, fast_exp in sorted({arithmetic(c) for c in cands.get("silu_mul", [])}):
        bad = {str(dt): silu_exhaustive_mismatches(dt, (1024, 4, div, True, native, 0, fast_exp))
               for dt in (torch.bfloat16, torch.float16)}  # fmt: skip
        exact[div, native, fast_exp] = bad["torch.bfloat16"] == 0  # the tables' entries are for bfloat16
        print(f"# silu_mul exhaustive over 16-bit gates, division {div}, 16-bit multiply {native}, "
              f"fast exp {fast_exp}: mismatches {bad}")  # fmt: skip
    spaces: dict[str, tuple[dict[str, int], Callable[..., Any]]] = {
        "rms_norm": ({"hidden": 4096}, norm.rms_norm_with),
        "fused_add_rms_norm": ({"hidden": 4096}, norm.fused_add_rms_norm_with),
        "silu_mul": ({"hidden": 14336}, activation.silu_mul_with),
        "rotary_embedding": ({"heads": 32, "head_dim": 128}, rotary.rotary_with),
    }
    for op, (extra, fn) in spaces.items():
        if op not in cands:
            continue
        configs = [c for c in cands[op] if op != "silu_mul" or exact[arithmetic(c)]]
        reg = kernels.registry().op(op)
        compiled = torch.compile(reg.reference, fullgraph=True, dynamic=False)
        for t in (tokens_by_op or {}).get(op, tokens):
            shape = {"tokens": t, **extra}
            args = make_args(op, shape, torch.bfloat16, torch.device("cuda"))
            ref, code = inductor_kernels(compiled, args)
            print(f"# inductor code, {op} tokens={t}:\n{code}\n# end of inductor code", flush=True)
            moved = bytes_moved(op, args, reg.reference(*args))
            src = torch.empty(moved // 4, dtype=torch.bfloat16, device="cuda").normal_()
            dst = torch.empty_like(src)
            fns: dict[str, Fn] = {
                "inductor": functools.partial(compiled, *args),
                "copy": functools.partial(dst.copy_, src),
            }
            eager = reg.reference(*args) if op == "silu_mul" else None
            for c in configs:
                try:
                    out = fn(*args, config=c)
                except Exception as exc:  # a variant that does not compile here is left out, said once
                    print(
                        f"# {op} config {c}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}), left out"
                    )
                    continue
                outs, refs = (out if isinstance(out, tuple) else (out,)), (ref if isinstance(ref, tuple) else (ref,))
                if eager is not None and not torch.equal(out, eager):
                    print(f"# {op} tokens={t} config {c}: NOT bit-exact with eager, left out")
                    continue
                if not all(torch.allclose(o.float(), r.float(), rtol=2e-2, atol=2e-2)
                           for o, r in zip(outs, refs, strict=True)):  # fmt: skip
                    print(f"# {op} tokens={t} config {c}: WRONG output, left out")
                    continue
                fns[repr(c)] = functools.partial(fn, *args, config=c)
            if op == "silu_mul":
                print(f"# silu_mul tokens={t}: the guarded division's exact path in "
                      f"{guarded_fraction(args[0]):.3%} of 4-element groups")  # fmt: skip
            samples, _ = measure(fns, rounds, 50 if t <= 512 else 10, rng)
            peer = statistics.median(samples["inductor"])
            print(f"## {op} tokens={t} ({moved / 1e6:.1f} MB): inductor {peer:.2f} us")
            for name, us in _best(samples):  # every candidate, with its per-round ratio spread
                r = [p / o for p, o in zip(samples["inductor"], samples[name], strict=True)]
                print(f"   {name:<36} {us:9.2f} us  {moved / us / 1e6:5.2f} TB/s  inductor/this {peer / us:5.3f}x "
                      f"[{min(r):.2f}-{max(r):.2f}]")  # fmt: skip
            best = eval(_best({n: s for n, s in samples.items() if n not in ("inductor", "copy")})[0][0])  # our repr
            bucket = 1 << max(0, (t - 1).bit_length())
            if op in ("rms_norm", "fused_add_rms_norm"):
                name, row = "rms_norm", [op == "fused_add_rms_norm", 4096, bucket, *best]
            elif op == "silu_mul":
                name, row = "silu_mul", ["bfloat16", 14336, bucket, *best]
            else:
                name, row = "rotary_embedding", [32, 64, bucket, *best]
            tables.setdefault(name, []).append(row)
            print(f"TABLE {op} tokens={t} {best}", flush=True)
            print(f"TABLE_ROW {json.dumps([name, row])}", flush=True)


def _stage(  # noqa: PLR0917
    peer: Fn,
    variants: dict[str, tuple[tuple[Any, ...], Any]],
    ref: torch.Tensor,
    rounds: int,
    calls: int,
    rng: random.Random,
) -> dict[str, list[float]]:
    """Times ``variants`` (name -> (args, plan) of the paged kernel, each checked against ``ref`` first) and
    ``peer`` in shuffled rounds."""
    from inferensics.kernels._triton import paged_attention as pa

    fns: dict[str, Fn] = {"cudnn": peer}
    for name, (args, p) in variants.items():
        try:
            out = pa.run_with_plan(*args, p).float()
        except Exception as exc:  # a variant that does not compile here is left out, said once
            print(f"# paged {name}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:100]}), left out")
            continue
        err = ((out - ref).norm() / ref.norm()).item()
        if not err < 2e-2:
            print(f"# paged {name}: WRONG (rel err {err:.2e}), left out")
            continue
        fns[name] = functools.partial(pa.run_with_plan, *args, p)
    samples, _ = measure(fns, rounds, calls, rng)
    return samples


def _plan_name(p: Any) -> str:
    merge = ("kernel+pdl" if p.pdl else "kernel") if p.merge_kernel else "last"
    waves = f"{p.waves:g}" if p.waves == int(p.waves) else f"{p.waves:.3f}"
    return (f"w{waves} min{p.min_split} n{p.block_n} warps{p.warps} st{p.stages}{' pf' if p.prefetch_pages else ''} "
            f"{'kv' if p.kv_fast else 'seq'} merge={merge}")  # fmt: skip


# (step, warps, stages, prefetch_pages). The page-table load takes a pipeline stage of its own, so up to 4 stages
# give the keys and values one shared-memory buffer (the next step's copy is issued after this step's math and awaited
# at the top of the next), 5 stages two buffers at a 64-token step and 6 at 32 (session 13 added those; session 12 swept
# only the first five). Session 13's first sweep also had 16-token steps (8 and 10 stages), 8 warps at 32/64-token
# steps and evict-first loads: none came within 2 % of the best anywhere (s13_attn_sweep.log). Session 14 added
# prefetched page numbers (the table load leaves the pipeline: stages - 1 K/V buffers, so a 64-token step gets two
# at 3 stages, three at 4 — two programs a multiprocessor, cuDNN's shape — and a 32-token step two to four).
PAGED_KERNEL_CONFIGS = [
    (64, 4, 2, False),
    (64, 4, 3, False),
    (64, 4, 4, False),
    (128, 4, 2, False),
    (128, 8, 3, False),
    (64, 4, 5, False),
    (32, 4, 6, False),
    (32, 4, 7, False),
    (64, 4, 3, True),
    (64, 4, 4, True),
    (32, 4, 3, True),
    (32, 4, 4, True),
    (32, 4, 5, True),
]


def fill_waves(units: int, sms: int, max_splits: int) -> list[float]:
    """Fractional ``waves`` whose split counts fill k x c x ``sms`` resident programs from below (c = 2, 3, 5
    programs a multiprocessor, the occupancies of the swept kernels; k = 1 ... 8 rounds of them)."""
    out = []
    for c in (2, 3, 5):
        for k in range(1, 9):
            splits = min(max_splits, k * c * sms // units)
            if splits >= 1:
                waves = (splits * units - 0.5) / sms
                assert math.ceil(waves * sms / units) == splits
                out.append(waves)
    return sorted(set(out))


def sweep_attention(  # noqa: PLR0917
    rounds: int,
    grid: list[tuple[int, int]],
    rng: random.Random,
    tables: dict[str, Any],
    save: Callable[[], None] = lambda: None,
    configs: list[tuple[int, int, int, bool]] | None = None,
    wave_options: list[float] | None = None,
) -> None:
    """Time candidate plans of the paged decode kernel against cuDNN SDPA on the dense copy (CUDA-graph replays);
    the fastest per shape bucket goes into ``tables``. Stage 1 times every kernel configuration at one split plan,
    stage 2 the split plans (waves, including split counts that fill the resident program slots, and merge
    placement, and the merge kernel as a programmatic dependent launch) of the two fastest and of the table's
    incumbent, and the incumbent itself. ``configs`` and ``wave_options`` narrow the search (a short visit). (Session 12
    also timed every plan on caches stored HND: within 0.8 % of NHD at context >= 4k and inside the spread below, so
    one plan serves both layouts; see ``benchmarks/results/kernels-h200/session12_attention.md``.)"""
    from torch.nn.attention import SDPBackend

    from inferensics.kernels._triton import paged_attention as pa
    from inferensics.kernels._triton.device_facts import sm_count

    summary = []
    for b, ctx in grid:
        shape = {"batch": b, "context": ctx, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page": 16}
        args = make_args("paged_decode_attention", shape, torch.bfloat16, torch.device("cuda"), seed=b + ctx)
        q, k_cache, v_cache, block_table, lens, scale = args
        lens.fill_(ctx)
        k_dense = k_cache[block_table.long()].reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        v_dense = v_cache[block_table.long()].reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        peer = functools.partial(_sdpa, SDPBackend.CUDNN_ATTENTION, q.unsqueeze(2), k_dense, v_dense, scale)
        ref = peer().squeeze(2).float()
        calls = 10 if b * ctx <= 8 * 4096 else 3
        max_tokens = block_table.shape[1] * 16
        key = pa.plan_key(b, 8, max_tokens)
        incumbent = pa.H200_PLANS.get(key)
        stage1 = list(configs or PAGED_KERNEL_CONFIGS)
        if incumbent is not None:
            inc_config = (incumbent.block_n, incumbent.warps, incumbent.stages, incumbent.prefetch_pages)
            stage1 += [] if inc_config in stage1 else [inc_config]
        first_plans = {
            _plan_name(p): (args, p) for p in (pa.Plan(4, 128, n, w, st, prefetch_pages=pf) for n, w, st, pf in stage1)
        }
        first = _stage(peer, first_plans, ref, rounds, calls, rng)
        _print_sweep(f"paged b={b} ctx={ctx} kernel configs (waves 4, min split 128)", first, "cudnn", 20)
        tops = {
            (p.block_n, p.warps, p.stages, p.prefetch_pages)
            for p in [first_plans[n][1] for n, _ in _best({n: s for n, s in first.items() if n != "cudnn"})[:2]]
            + ([incumbent] if incumbent is not None else [])
        }
        fill = fill_waves(b * 8, sm_count(q.device), max(1, max_tokens // 64))
        waves_here = wave_options or [2, 3, 4, 6, 8, 16, *fill]
        candidates = [incumbent] if incumbent is not None else []
        if incumbent is not None and incumbent.merge_kernel:  # the incumbent with and without the dependent launch
            candidates.append(dataclasses.replace(incumbent, pdl=not incumbent.pdl))
        candidates += [
            pa.Plan(waves, 64, n, w, st, True, merge_kernel, pdl, pf)
            for n, w, st, pf in sorted(tops) for waves in waves_here
            for merge_kernel, pdl in ((False, False), (True, False), (True, True))
        ]  # fmt: skip
        second_plans: dict[str, tuple[tuple[Any, ...], Any]] = {}
        seen: set[tuple[Any, ...]] = set()
        incumbent_name = ""
        for p in candidates:  # plans that launch the same work are timed once
            splits, chunk = pa.split_plan(b, 8, max_tokens, sm_count(q.device), p.waves, p.min_split, p.block_n)
            merge = splits > 1 and p.merge_kernel
            launch = (p.block_n, p.warps, p.stages, p.prefetch_pages, p.kv_fast, splits, chunk, merge, merge and p.pdl)
            if launch not in seen:
                seen.add(launch)
                name = f"{_plan_name(p)} ({splits} splits)"
                second_plans[name] = (args, p)
                incumbent_name = incumbent_name or (name if p is incumbent else "")
        second = _stage(peer, second_plans, ref, rounds, calls, rng)
        _print_sweep(f"paged b={b} ctx={ctx} split plans", second, "cudnn", 16)
        name, us = _best({n: s for n, s in second.items() if n != "cudnn"})[0]
        p = second_plans[name][1]
        row = [key, round(p.waves, 4), p.min_split, p.block_n, p.warps, p.stages, p.kv_fast, p.merge_kernel]
        tables.setdefault("paged", []).append([*row, p.pdl, p.prefetch_pages])
        print(f"TABLE paged {key} {name}", flush=True)
        save()  # after each cell, so a run cut short keeps the cells it finished
        cudnn = statistics.median(second["cudnn"])
        line = f"b={b} ctx={ctx}: cudnn {cudnn:.2f} us, ours {us:.2f} us ({cudnn / us:.2f}x)"
        if incumbent_name in second:
            inc = statistics.median(second[incumbent_name])
            line += f"; incumbent {incumbent_name} {inc:.2f} us ({cudnn / inc:.2f}x)"
        summary.append(line)
        del k_dense, v_dense, peer, first, second, first_plans, second_plans
        torch.cuda.empty_cache()
    print("\n# paged sweep summary (best plan; cudnn/ours)")
    for line in summary:
        print(line)


def tuned_configs() -> None:
    """The configurations Triton's autotuner chose for our kernels in this run (key -> config)."""
    from inferensics.kernels._triton import activation, norm, paged_attention, rotary

    print("\n# autotuned configurations")
    for name, tuner in (
        ("rms_norm", norm._rms_norm_tuned),
        ("silu_mul", activation._silu_mul_tuned),
        ("rotary", rotary._rotary_tuned),
        ("paged_split", paged_attention._split_tuned),
    ):
        for key, config in getattr(tuner, "cache", {}).items():
            print(f"{name:<12} autotuned {key} -> {config}")
    for name, table in (
        ("rms_norm", norm.H200_CONFIGS),
        ("silu_mul", activation.H200_CONFIGS),
        ("rotary", rotary.H200_CONFIGS),
        ("paged_split", paged_attention.H200_PLANS),
    ):
        print(f"{name:<12} measured table (compute capability 9.0): {len(table)} entries")
        for key, value in table.items():
            print(f"    {key} -> {value}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="fewer attention shapes")
    ap.add_argument("--only", choices=("elementwise", "attention"), default=None)
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument(
        "--sweep", action="store_true", help="time candidate launch configurations instead (prints TABLE lines)"
    )
    ap.add_argument("--write-tables", default=None, help="with --sweep: write the fastest configurations here (JSON)")
    ap.add_argument(
        "--no-flex", action="store_true", help="leave FlexAttention's paged path out (it compiles per shape)"
    )
    ap.add_argument(
        "--flex-batches", default=None, help="run FlexAttention's paged path only at these batch sizes (e.g. 1,8)"
    )
    ap.add_argument("--batches", default=None, help="attention: only these batch sizes of the grid (e.g. 1,8)")
    ap.add_argument("--tokens", default=None, help="elementwise: only these token counts of 8,512,8192 (e.g. 8,512)")
    ap.add_argument(
        "--calls", type=int, default=20,
        help="elementwise: calls a CUDA graph replays per round (more amortise the graph launch at small shapes)",
    )  # fmt: skip
    ap.add_argument(
        "--paged-configs", default=None,
        help="with --sweep: the paged kernel configurations of stage 1 (step,warps,stages[,pf];... pf: prefetched "
             "page numbers), instead of PAGED_KERNEL_CONFIGS (the incumbent's is always added)",
    )  # fmt: skip
    ap.add_argument("--paged-waves", default=None, help="with --sweep: the waves of stage 2 (e.g. 2,4,16)")
    ns = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_kernels needs a CUDA device", file=sys.stderr)
        raise SystemExit(2)
    import triton

    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · triton {triton.__version__} · "
          f"load {os.getloadavg()[0]:.2f} · {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")  # fmt: skip
    rng = random.Random(0)
    if ns.sweep:
        tables: dict[str, Any] = {
            "measured_on": f"{torch.cuda.get_device_name()} (capability {torch.cuda.get_device_capability()})",
            "torch": torch.__version__, "triton": triton.__version__,
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "how": f"benchmarks/bench_kernels.py --sweep --rounds {ns.rounds}: CUDA-graph replays, shuffled rounds, "
                   "fastest median per shape bucket (outputs checked first)",
        }  # fmt: skip

        def save() -> None:  # after each part, so a run cut short keeps what it measured
            if ns.write_tables:
                with open(ns.write_tables, "w") as f:
                    json.dump(tables, f, indent=1)
                print(f"# tables written to {ns.write_tables}", flush=True)

        if ns.only in (None, "elementwise"):
            sweep_rows(ns.rounds, [8, 512, 8192], rng, tables)
            save()
        if ns.only in (None, "attention"):
            configs = [
                (int(n), int(w), int(st), pf == ["pf"])
                for n, w, st, *pf in (c.split(",") for c in ns.paged_configs.split(";"))
            ] if ns.paged_configs else None  # fmt: skip
            waves = [float(v) for v in ns.paged_waves.split(",")] if ns.paged_waves else None
            grid = [(b, c) for b in (1, 8, 64) for c in (1024, 4096, 32768)]
            if ns.batches:
                grid = [(b, c) for b, c in grid if b in {int(v) for v in ns.batches.split(",")}]
            sweep_attention(ns.rounds, grid, rng, tables, save, configs, waves)
            save()
        return
    copy_tb_s = copy_bandwidth(ns.rounds, rng)
    print(f"# copy bandwidth: {copy_tb_s:.2f} TB/s (1 GiB device-to-device, read + write)\n")
    table = Table()
    header()
    if ns.only in (None, "elementwise"):
        tokens = [int(v) for v in ns.tokens.split(",")] if ns.tokens else [8, 512, 8192]
        elementwise(table, ns.rounds, tokens, rng, ns.calls)
    if ns.only in (None, "attention"):
        grid = [(1, 1024), (8, 4096), (64, 32768)] if ns.quick else [
            (b, c) for b in (1, 8, 64) for c in (1024, 4096, 32768)
        ]  # fmt: skip
        if ns.batches:
            grid = [(b, c) for b, c in grid if b in {int(v) for v in ns.batches.split(",")}]
        flex_batches = {int(v) for v in ns.flex_batches.split(",")} if ns.flex_batches else None
        attention(table, ns.rounds, grid, rng, with_flex=not ns.no_flex, flex_batches=flex_batches)
    verdicts(table, copy_tb_s)
    tuned_configs()
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"copy_tb_s": copy_tb_s, "rows": table.rows}, f, indent=1)


if __name__ == "__main__":
    main()
