"""Arguments for each op at a named shape, and the bytes a call must move (for bandwidth figures).

Shared by qualification, the benchmark and the differential tests, so all three measure the same thing.
A shape is a small dict: ``{"tokens": 8, "hidden": 4096}`` for the row ops, ``{"tokens", "heads",
"head_dim"}`` for rotary, ``{"batch", "context", "q_heads", "kv_heads", "head_dim", "page"}`` for paged
attention. An op of your own gives its fields and how to make its arguments as :class:`Samples`
(``SemanticOp(..., samples=Samples(...))``); an op without them cannot be qualified, and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

MAX_SIZE = 2**31 - 1
"""The largest size a shape field takes: past int32's range no kernel here indexes it, and the arguments would not
fit in any device's memory."""


@dataclass(frozen=True, slots=True)
class Samples:
    """How qualification makes the arguments of an op of your own at a named shape.

    Attributes:
        fields: The shape's fields, all required, each a positive integer (``("tokens", "hidden")``).
        make: ``make(shape, dtype, device, seed)``: the op's arguments at ``shape`` (floating tensors in ``dtype``,
            on ``device``, reproducible from ``seed``).
        shapes: The shapes qualified when none are given (none: the op is qualified only at shapes given).
    """

    fields: tuple[str, ...]
    make: Callable[[dict[str, int], torch.dtype, torch.device, int], tuple[Any, ...]]
    shapes: tuple[dict[str, int], ...] = field(default_factory=tuple)


PAGE = 16
"""Tokens per KV page in the default shapes."""

GPU_SHAPES: dict[str, list[dict[str, int]]] = {
    "rms_norm": [{"tokens": t, "hidden": 4096} for t in (8, 512, 8192)],
    "fused_add_rms_norm": [{"tokens": t, "hidden": 4096} for t in (8, 512, 8192)],
    "silu_mul": [{"tokens": t, "hidden": 14336} for t in (8, 512, 8192)],
    "rotary_embedding": [{"tokens": t, "heads": 32, "head_dim": 128} for t in (8, 512, 8192)],
    "paged_decode_attention": [
        {"batch": b, "context": c, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page": PAGE}
        for b, c in ((1, 1024), (8, 4096), (32, 8192), (64, 32768))
    ],
}
"""LLM shapes (hidden 4096, intermediate 14336, GQA 32/8, head_dim 128) qualified on a GPU by default."""

CPU_SHAPES: dict[str, list[dict[str, int]]] = {
    "rms_norm": [{"tokens": 3, "hidden": 64}, {"tokens": 33, "hidden": 96}],
    "fused_add_rms_norm": [{"tokens": 3, "hidden": 64}, {"tokens": 33, "hidden": 96}],
    "silu_mul": [{"tokens": 3, "hidden": 80}, {"tokens": 33, "hidden": 128}],
    "rotary_embedding": [{"tokens": 5, "heads": 4, "head_dim": 32}],
    "paged_decode_attention": [
        {"batch": 2, "context": 100, "q_heads": 4, "kv_heads": 2, "head_dim": 64, "page": PAGE},
    ],
}
"""Small shapes for CPU and Triton's interpreter."""


SHAPE_FIELDS: dict[str, tuple[str, ...]] = {
    "rms_norm": ("tokens", "hidden"),
    "fused_add_rms_norm": ("tokens", "hidden"),
    "silu_mul": ("tokens", "hidden"),
    "rotary_embedding": ("tokens", "heads", "head_dim"),
    "paged_decode_attention": ("batch", "context", "q_heads", "kv_heads", "head_dim", "page"),
}
"""The fields of each op's shape, all of them required (``make_args`` reads these and nothing else)."""


def shape_fields(op: str, samples: Samples | None = None) -> tuple[str, ...] | None:
    """The fields of ``op``'s shapes (``samples``' for an op of your own), or ``None``: it has no sample arguments."""
    return samples.fields if samples is not None else SHAPE_FIELDS.get(op)


def no_samples(op: str) -> str:
    """Why ``op`` cannot be qualified: it has no sample arguments (and how to give it some)."""
    return (
        f"no sample arguments for op {op!r}: qualification cannot make its arguments; give it "
        "SemanticOp(..., samples=kernels.Samples(fields, make)) to qualify it"
    )


def shape_problem(op: str, shape: Any, samples: Samples | None = None) -> str | None:
    """Why ``shape`` is not a shape of ``op`` (a missing or unknown field, or one that is not a positive integer up to
    :data:`MAX_SIZE`), or ``None``."""
    fields = shape_fields(op, samples)
    if fields is None:
        return no_samples(op)
    if not isinstance(shape, dict):
        return f"expected an object with {', '.join(fields)}, got {type(shape).__name__}"
    problems = []
    missing = [f for f in fields if f not in shape]
    if missing:
        problems.append("lacks " + ", ".join(missing))
    unknown = [str(k) for k in shape if k not in fields]
    if unknown:
        problems.append("has unknown " + ", ".join(unknown))
    # Zero is refused too: empty tensors time nothing but the launch, and a page of 0 would divide by zero.
    bad = [f"{k}={v!r}" for k, v in shape.items() if k in fields and (type(v) is not int or v < 1)]
    if bad:
        what = " is not a positive integer" if len(bad) == 1 else " are not positive integers"
        problems.append(", ".join(bad) + what)
    huge = [f"{k}={v}" for k, v in shape.items() if k in fields and type(v) is int and v > MAX_SIZE]
    if huge:
        problems.append(f"{', '.join(huge)} {'is' if len(huge) == 1 else 'are'} above {MAX_SIZE} (2**31 - 1)")
    return f"{' and '.join(problems)} ({op} takes {', '.join(fields)})" if problems else None


def default_shapes(op: str, device: torch.device, samples: Samples | None = None) -> list[dict[str, int]]:
    """The shapes qualification uses for ``op`` on ``device`` when none are given (``samples``' for an op of your
    own)."""
    if samples is not None:
        return [dict(s) for s in samples.shapes]
    return (GPU_SHAPES if device.type == "cuda" else CPU_SHAPES).get(op, [])


def shape_label(shape: dict[str, int]) -> str:
    """``tokens=8,hidden=4096``."""
    return ",".join(f"{k}={v}" for k, v in shape.items())


def _need(op: str, shape: dict[str, int]) -> list[int]:
    problem = shape_problem(op, shape)
    if problem is not None:
        raise ValueError(f"shape {shape_label(shape)}: {problem}")
    return [int(shape[k]) for k in SHAPE_FIELDS[op]]


def make_args(
    op: str,
    shape: dict[str, int],
    dtype: torch.dtype,
    device: torch.device,
    seed: int = 0,
    *,
    samples: Samples | None = None,
) -> tuple[Any, ...]:
    """Random arguments of ``op`` at ``shape`` (normal values; reproducible from ``seed`` on one kind of device:
    paged attention's caches are drawn on the GPU when ``device`` is one); ``samples`` makes an op of your own's."""
    if samples is not None:
        problem = shape_problem(op, shape, samples)
        if problem is not None:
            raise ValueError(f"shape {shape_label(shape)}: {problem}")
        return tuple(samples.make(dict(shape), dtype, device, seed))
    g = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*size: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(size, generator=g) * scale).to(device=device, dtype=dtype)

    if op in ("rms_norm", "fused_add_rms_norm"):
        t, h = _need(op, shape)
        weight = 1.0 + randn(h, scale=0.1)
        if op == "rms_norm":
            return randn(t, h), weight, 1e-6
        return randn(t, h), randn(t, h), weight, 1e-6
    if op == "silu_mul":
        t, h = _need(op, shape)
        return (randn(t, 2 * h, scale=2.0),)
    if op == "rotary_embedding":
        t, heads, d = _need(op, shape)
        freqs = 1.0 / (10000.0 ** (torch.arange(d // 2, dtype=torch.float32) / (d // 2)))
        angles = torch.outer(torch.arange(t, dtype=torch.float32) * 7 % 4096, freqs)
        return randn(t, heads, d), angles.cos().to(device), angles.sin().to(device)
    if op == "paged_decode_attention":
        b, ctx, hq, hkv, d, page = _need(op, shape)
        per_seq = -(-ctx // page)
        pages = b * per_seq
        # Pages of each sequence scattered over the cache (a random permutation), as an allocator leaves them.
        table = torch.randperm(pages, generator=g).reshape(b, per_seq).to(torch.int32)
        lens = torch.full((b,), ctx, dtype=torch.int32)
        if b > 1:  # ragged: the last sequence is shorter, ending inside a page
            lens[-1] = max(1, ctx - page - 3)
        q = randn(b, hq, d)
        if device.type == "cuda":  # gigabytes of cache at 64 x 32k: drawn on the GPU (tens of seconds on the host)
            gd = torch.Generator(device=device).manual_seed(seed)
            k, v = (torch.randn((pages, page, hkv, d), generator=gd, device=device, dtype=dtype) for _ in "kv")
        else:
            k, v = randn(pages, page, hkv, d), randn(pages, page, hkv, d)
        return (
            q,
            k,
            v,
            table.to(device),
            lens.to(device),
            d**-0.5,
        )
    raise ValueError(no_samples(op))


def bytes_moved(op: str, args: tuple[Any, ...], out: Any) -> int:
    """Bytes a call must read and write at least (inputs it reads once, outputs it writes once)."""
    outs = out if isinstance(out, tuple) else (out,)
    written = sum(t.numel() * t.element_size() for t in outs if isinstance(t, torch.Tensor))
    if op == "paged_decode_attention":
        q, k_cache, _, _, lens, _ = args
        hkv, d = k_cache.shape[2], k_cache.shape[3]
        kv = int(lens.long().sum()) * hkv * d * k_cache.element_size() * 2
        return int(q.numel() * q.element_size() + kv + written)
    read = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    return int(read + written)
