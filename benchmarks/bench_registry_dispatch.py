"""The kernel registry's eager dispatch cost: a call through the registry (``kernels.rms_norm(...)``, the C++
dispatcher, the decision, the provider) against the provider it picked called directly, per op, in the same
run, rounds interleaved.

    .venv/bin/python benchmarks/bench_registry_dispatch.py                     # CPU, small shapes
    python benchmarks/bench_registry_dispatch.py --device cuda --dtype bfloat16   # a GPU, decode shapes

Up to six callables per op, each timed as a loop of ``--calls`` calls (a GPU synchronised once at the end):

- ``direct``: the chosen provider's function. A Triton provider's eager call runs its op's body without the
  ``torch.library`` op, and on CUDA replays a launch plan of that body (``kernels/_triton/launches.py``);
- ``body`` (a Triton provider only): its op's body called as it is, Triton's launch path every call;
- ``op`` (a Triton provider only): every call through its ``torch.library`` op, as eager calls went before they
  were made direct;
- ``registry``: the public function (after the first call of a signature, in plain eager, the hot path without the
  dispatcher);
- ``dispatcher``: ``torch.ops.inferensics.<op>`` (the C++ dispatcher calls the Python implementation, which takes
  the hot path);
- ``full path``: the registry with the hot path switched off in this process, each call deciding as before it
  existed.

Per round the per-call time of each, in an order that rotates; printed: the median and range over rounds of each
one's added time per call (minus direct, µs). Compiled graphs never pass through the registry: these costs are
eager serving's alone. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from inferensics import kernels
from inferensics.kernels import _torch_adapter
from inferensics.kernels import op as op_module
from inferensics.kernels.samples import make_args

SHAPES: dict[str, dict[str, dict[str, int]]] = {
    "cpu": {
        "rms_norm": {"tokens": 8, "hidden": 256},
        "fused_add_rms_norm": {"tokens": 8, "hidden": 256},
        "silu_mul": {"tokens": 8, "hidden": 512},
        "rotary_embedding": {"tokens": 8, "heads": 4, "head_dim": 64},
        "paged_decode_attention": {"batch": 2, "context": 256, "q_heads": 4, "kv_heads": 2, "head_dim": 64, "page": 16},
    },
    "cuda": {
        "rms_norm": {"tokens": 8, "hidden": 4096},
        "fused_add_rms_norm": {"tokens": 8, "hidden": 4096},
        "silu_mul": {"tokens": 8, "hidden": 14336},
        "rotary_embedding": {"tokens": 8, "heads": 32, "head_dim": 128},
        "paged_decode_attention": {
            "batch": 8, "context": 1024, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page": 16,
        },
    },
}  # fmt: skip


def per_call_us(fn: Callable[[], Any], calls: int, sync: Callable[[], None]) -> float:
    """Microseconds per call of a loop of ``calls`` calls (synchronised once at the end)."""
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def callables(name: str, args: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
    """``direct``, ``registry`` and ``full path`` for op ``name`` on ``args``."""
    public = getattr(kernels, name)
    public(*args)  # decides the signature
    semantic = kernels.registry().op(name)
    chosen = semantic.log.snapshot()
    decision = next(d for d in chosen if not d.compiled and d.signature == kernels.signature(args))
    provider = semantic.providers[decision.provider].fn

    def full_path() -> Any:
        key = op_module._tensor_key
        op_module._tensor_key = lambda _args: None  # the hot path off, this call only
        try:
            return public(*args)
        finally:
            op_module._tensor_key = key

    entry = getattr(provider, "entry", None)  # a Triton provider: its torch.library op, never called directly
    via_op = entry() if entry is not None else None
    body = _body(provider.__name__) if entry is not None else None
    return {
        "direct": lambda: provider(*args),
        **({"body": lambda: _torch_adapter.run_unwrapped(body, args)} if body is not None else {}),
        **({"op": lambda: via_op(*args)} if via_op is not None else {}),
        "registry": lambda: public(*args),
        "dispatcher": lambda: semantic.overload(*args),
        "full path": full_path,
    }


def _body(name: str) -> Callable[..., Any] | None:
    """The Python body of Triton op ``name`` (its module's ``DIRECT``), which a direct eager call replays from a launch
    plan on CUDA (``kernels/_triton/launches.py``): called here as it is, Triton's launch path every call."""
    for module in ("norm", "activation", "rotary", "paged_attention"):
        loaded = importlib.import_module(f"inferensics.kernels._triton.{module}")
        if name in loaded.DIRECT:
            return loaded.DIRECT[name]  # type: ignore[no-any-return]
    return None


def spread(values: list[float]) -> str:
    """``median [min, max]``."""
    return f"{statistics.median(values):7.2f} [{min(values):6.2f}, {max(values):6.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--ops", default=",".join(SHAPES["cpu"]), help="comma-separated op names")
    a = parser.parse_args()
    device, dtype = torch.device(a.device), getattr(torch, a.dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(
        f"# registry dispatch · {platform.processor() or platform.machine()} · torch {torch.__version__} · "
        f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'} · {a.dtype} · {a.calls} calls × "
        f"{a.rounds} rounds · load {os.getloadavg()[0]:.2f}"
    )
    heads = ("body", "op", "registry", "dispatcher", "full path")
    print(f"{'op':24} {'provider':10} {'direct us':>10}" + "".join(f"{h + ' +us [range]':>26}" for h in heads))
    for name in a.ops.split(","):
        args = make_args(name, SHAPES[device.type][name], dtype, device)
        fns = callables(name, args)
        for fn in fns.values():  # warm-up
            per_call_us(fn, max(a.calls // 10, 10), sync)
        rows: dict[str, list[float]] = {k: [] for k in fns}
        order = list(fns)
        for r in range(a.rounds):
            for k in order[r % len(order) :] + order[: r % len(order)]:
                rows[k].append(per_call_us(fns[k], a.calls, sync))
        direct = rows["direct"]
        added = [spread([x - d for x, d in zip(rows[k], direct, strict=True)]) if k in rows else "-" for k in heads]
        provider = next(d.provider for d in kernels.registry().op(name).log.snapshot() if not d.compiled)
        print(f"{name:24} {provider:10} {statistics.median(direct):10.2f}" + "".join(f"{x:>26}" for x in added))
    print(
        "# time a call adds to the provider's own (median, range over rounds): body = the Triton provider's op body "
        "called as it is (on CUDA a direct call replays a launch plan of it); op = the Triton provider through its "
        "torch.library op; registry = the public function; "
        "dispatcher = torch.ops.inferensics.<op> (the hot path behind the C++ dispatcher's hop into Python); "
        "full path = each call deciding (the hot path off)"
    )


if __name__ == "__main__":
    main()
