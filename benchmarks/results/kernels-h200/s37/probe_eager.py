"""Where an eager call of a Triton provider spends its host time (session 37 probe, CUDA only).

Per op at bench_registry_dispatch.py's decode shapes: µs per call of the provider (a loop of calls, one sync),
of its Python body without torch.library's custom-op call, of torch's own eager peer, and a cProfile of the
provider's calls (top frames by own time and by cumulative time). Prints figures; asserts nothing.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys

import torch
from torch.nn import functional

sys.path.insert(0, "benchmarks")
from bench_registry_dispatch import SHAPES, callables, per_call_us

from inferensics.kernels.samples import make_args

sync = torch.cuda.synchronize


def peer(name: str, args: tuple) -> object:
    if name == "rms_norm":
        x, w, eps = args
        return lambda: functional.rms_norm(x, (x.shape[-1],), w, eps)
    if name == "fused_add_rms_norm":
        x, r, w, eps = args
        return lambda: functional.rms_norm(x + r, (x.shape[-1],), w, eps)
    if name == "silu_mul":
        (x,) = args
        n = x.shape[-1] // 2
        return lambda: functional.silu(x[..., :n]) * x[..., n:]
    if name == "rotary_embedding":
        x, cos, sin = args[:3]
        half = x.shape[-1] // 2
        c, s = cos[:, None, :], sin[:, None, :]

        def rotary() -> torch.Tensor:  # the same math as torch ops: x [T, H, D], cos/sin [T, D/2]
            x1, x2 = x[..., :half], x[..., half:]
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)

        return rotary
    if name == "paged_decode_attention":
        q = args[0]
        k = torch.randn(q.shape[0], 8, 1024, 128, dtype=q.dtype, device=q.device)
        return lambda: functional.scaled_dot_product_attention(q[:, :, None, :], k, k, enable_gqa=True)
    return None


OPS = {
    "rms_norm": ("norm", "rms_norm_triton"),
    "fused_add_rms_norm": ("norm", "fused_add_rms_norm_triton"),
    "silu_mul": ("activation", "silu_mul_triton"),
    "rotary_embedding": ("rotary", "rotary_triton"),
    "paged_decode_attention": ("paged_attention", "paged_decode_attention_triton"),
}


def through_op(name: str) -> object:
    """The provider's torch.library op (the path every eager call took before session 37)."""
    import importlib

    module, fn = OPS[name]
    return getattr(importlib.import_module(f"inferensics.kernels._triton.{module}"), fn)


def main() -> None:
    print(torch.__version__, torch.cuda.get_device_name())
    import triton

    print("triton", triton.__version__)
    for name in SHAPES["cuda"]:
        args = make_args(name, SHAPES["cuda"][name], torch.bfloat16, torch.device("cuda"))
        fns = callables(name, args)
        direct = fns["direct"]
        from inferensics import kernels

        semantic = kernels.registry().op(name)
        dec = next(d for d in semantic.log.snapshot() if not d.compiled)
        provider = semantic.providers[dec.provider].fn
        print(f"\n=== {name}: provider {dec.provider} ({provider!r})")
        timed = {"direct": direct, "registry": fns["registry"]}
        op = through_op(name)
        timed["through the op (old path)"] = lambda op=op, args=args: op(*args)
        p = peer(name, args)
        if p is not None:
            timed["torch eager peer"] = p
        timed["torch.empty_like"] = lambda args=args: torch.empty_like(args[0])
        for fn in timed.values():
            per_call_us(fn, 300, sync)
        rows: dict[str, list[float]] = {k: [] for k in timed}
        for _ in range(7):
            for k, fn in timed.items():
                rows[k].append(per_call_us(fn, 1000, sync))
        for k, v in rows.items():
            print(f"  {k:28} {statistics.median(v):8.2f} us/call [{min(v):.2f}, {max(v):.2f}]")
        prof = cProfile.Profile()
        sync()
        prof.enable()
        for _ in range(2000):
            direct()
        prof.disable()
        sync()
        for key, n in (("tottime", 25), ("cumulative", 45)):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(key).print_stats(n)
            print("\n".join(ln for ln in s.getvalue().splitlines() if ln.strip())[:9000])


if __name__ == "__main__":
    main()
