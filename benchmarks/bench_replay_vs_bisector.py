"""Replay against PyTorch's CompilerBisector on the planted-fault suite, side by side, in one process.

Both get the same oracle (the fp64-anchored comparison replay uses), the same models, inputs, serving
history and planted compiler; the bisector's answer (backend, subsystem, debug_info) is mapped to
replay's categories where it has one. Prints, per fault, category, op, line and seconds for both, and
the totals. Rounds alternate which tool runs first for each fault (A/B interleaved), so warm kernel
caches favour neither.

    .venv/bin/python benchmarks/bench_replay_vs_bisector.py [--only SUBSTRING ...] [--rounds N] [--device cuda]
        [--demo]

A ``kernel_provider`` fault counts as right for replay only when it also names the planted provider and its
kernel function's line. ``--demo`` adds the time to verdict for the demo decoder's failing requests.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config

from inferensics.bundle.tolerance import fp64_model, to_fp64
from inferensics.replay import investigate
from inferensics.replay._internal import torch_adapter as ta
from inferensics.replay._internal.ladder import as_call, call_model
from inferensics.replay._internal.tolerance import compare
from tests.replay.faults import PlantedFault, build_suite, fault_line, on_device

_BISECT_CATEGORY = {
    "eager": "source_op",
    "aot_eager": "graph_pass",
    "aot_eager_decomp_partition": "decomposition",
    "aot_eager_decomp_partition_crossref": "decomposition",
}
_SUBSYSTEM_CATEGORY = {
    "lowerings": "lowering",
    "pre_grad_passes": "graph_pass",
    "joint_graph_passes": "graph_pass",
    "post_grad_passes": "graph_pass",
    "decomposition": "decomposition",
}


def bisect(fault: PlantedFault) -> tuple[str, str, str, float]:
    """CompilerBisector with replay's oracle: (category, op, detail, seconds)."""
    from torch._inductor.compiler_bisector import CompilerBisector

    request = as_call(fault.inputs)
    try:  # the oracle's bounds are checked on the host, as replay's are: on a GPU an out-of-range id is a
        # device-side assert that ends the process's CUDA context (on CPU the op raises by itself)
        with ta.index_bounds_checked(list(fault.inputs)):
            ref = call_model(fp64_model(fault.model), to_fp64(request))
    except Exception as exc:  # the bisector needs a reference output; a request every path rejects has none
        return f"- (reference raises {type(exc).__name__})", "", "", 0.0
    eager = call_model(fault.model, request)

    def good() -> bool:
        torch._dynamo.reset()
        compiled = torch.compile(fault.model, **fault.compile_kwargs)
        try:
            for w in fault.warmup:
                call_model(compiled, as_call(w))
            out = call_model(compiled, request)
        except Exception:
            return False
        return compare("bisect", out, ref, eager).passed

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = CompilerBisector.do_bisect(good)
    seconds = time.perf_counter() - start
    if result is None:
        return "none", "", "", seconds
    category = _SUBSYSTEM_CATEGORY.get(result.subsystem or "", _BISECT_CATEGORY.get(result.backend, ""))
    if not category:
        category = f"{result.backend}/{result.subsystem or '-'}"
    op = str(result.debug_info or "")
    if "OpOverload" in op:
        op = "aten." + op.split("op='aten.")[1].split("'", maxsplit=1)[0] if "op='aten." in op else op
    elif op and category == "lowering":
        op = f"aten.{op}"
    return category, op, f"{result.backend}/{result.subsystem}/{result.debug_info}", seconds


def replay(fault: PlantedFault) -> tuple[str, str, int, float, str]:
    """Replay's investigate: (category, op, line, seconds, provider problem or "")."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = investigate(
            fault.model,
            fault.inputs,
            compile_kwargs=fault.compile_kwargs,
            warmup_inputs=fault.warmup,
            device=str(next((t.device for t in fault.inputs if isinstance(t, torch.Tensor)), "cpu")),
        )
    problem = ""
    if fault.provider:  # a kernel_provider fault must also name the provider and its kernel function's line
        served = verdict.evidence.get("provider") or {}
        got = (served.get("provider"), served.get("provider_line"))
        if got != (fault.provider, fault_line(fault.provider_marker)):
            problem = f" provider {got[0]}:{got[1]}"
    return verdict.category, verdict.op, verdict.source_line, time.perf_counter() - start, problem


def demo_times(device: str) -> None:
    """Time to verdict for the demo decoder's failing requests (canary prefill, NaN-cache decode step)."""
    from inferensics.demo import incidents
    from tests.replay.demo_requests import nan_decode_request, prefill_request

    cases = [("canary prefill (SiLU decomposition)", prefill_request, incidents.decomposition_fault)]
    cases.append(("NaN-cache decode step", nan_decode_request, contextlib.nullcontext))
    for name, build, plant in cases:
        model, inputs = build()
        with plant(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            verdict = investigate(model, inputs, device=device)
            seconds = time.perf_counter() - start
        print(
            f"time to verdict, demo decoder {name}: {seconds:.1f} s on {device} "
            f"({verdict.category} {verdict.op} :{verdict.source_line}, {verdict.evidence.get('compiles')} compiles)",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="run faults whose name contains one of these")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (Triton kernels)")
    parser.add_argument("--demo", action="store_true", help="also time replay on the demo decoder's failing requests")
    parser.add_argument("--demo-only", action="store_true", help="only time the demo decoder's failing requests")
    args = parser.parse_args(argv)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"torch {torch.__version__}  device {name}  load average {os.getloadavg()}")
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    if args.demo_only:
        demo_times(args.device)
        return
    rows: list[dict[str, Any]] = []
    faults = [on_device(f, args.device) for f in build_suite() if not args.only or any(o in f.name for o in args.only)]
    header = f"{'fault':44s} {'expected':34s} | {'replay':38s} {'s':>6s} | {'bisector':38s} {'s':>6s}"
    print(header)
    print("-" * len(header))
    for round_ in range(args.rounds):
        for i, fault in enumerate(faults):
            order = ("replay", "bisector") if (i + round_) % 2 == 0 else ("bisector", "replay")
            got: dict[str, Any] = {}
            for tool in order:
                with fault.planted():
                    got[tool] = replay(fault) if tool == "replay" else bisect(fault)
            r_cat, r_op, r_line, r_s, r_problem = got["replay"]
            b_cat, b_op, b_detail, b_s = got["bisector"]
            expected = f"{fault.category} {fault.op} :{fault.line}"
            r_ok = r_cat == fault.category and r_op == fault.op and r_line == fault.line and not r_problem
            b_ok = b_cat == fault.category and b_op == fault.op
            r_text = ("ok " if r_ok else "NO ") + f"{r_cat} {r_op} :{r_line}{r_problem}"[:35]
            b_text = ("ok " if b_ok else "NO ") + f"{b_cat} {b_op} :-"[:35]
            print(
                f"{fault.name[:44]:44s} {expected[:34]:34s} | {r_text:38s} {r_s:6.1f} | {b_text:38s} {b_s:6.1f}",
                flush=True,
            )
            rows.append(
                {
                    "fault": fault.name,
                    "replay_ok": r_ok,
                    "replay_s": r_s,
                    "bisect_ok": b_ok,
                    "bisect_s": b_s,
                    "bisect_category_ok": b_cat == fault.category,
                    "bisect_op_ok": b_op == fault.op,
                    "bisect": b_detail,
                }
            )
    n = len(rows)
    ratios = [r["replay_s"] / r["bisect_s"] for r in rows if r["bisect_s"] > 0]
    print()
    r_right, r_total = sum(r["replay_ok"] for r in rows), sum(r["replay_s"] for r in rows)
    b_cat = sum(r["bisect_category_ok"] for r in rows)
    b_op, b_total = sum(r["bisect_op_ok"] for r in rows), sum(r["bisect_s"] for r in rows)
    print(f"replay:   {r_right}/{n} right on category+op+line; total {r_total:.1f} s")
    print(f"bisector: {b_cat}/{n} right category, {b_op}/{n} right op, 0/{n} lines; total {b_total:.1f} s")
    if ratios:
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        med = statistics.median(ratios)
        print(f"replay/bisector seconds per fault: median {med:.2f} (quartiles {q[0]:.2f}-{q[2]:.2f}, n={len(ratios)})")
    if args.demo:
        demo_times(args.device)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
