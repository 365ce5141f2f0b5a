"""OpInfo-style samples for the differential suite: ordinary, odd and unaligned, empty, 0-dim,
non-contiguous and transposed, extremal values (inf, -inf, NaN, ±1e20, large fp16), the widest supported
row, ragged and empty paged sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

LARGE_FP16 = (501.0, -501.0, 1001.2, -1001.2, 13437.7, -13437.7)
"""``_large_float16_vals`` of PyTorch's OpInfo."""
EXTREMAL = (float("inf"), float("-inf"), float("nan"), 1e20, -1e20)


@dataclass(frozen=True)
class Sample:
    """One call's arguments and a name for the test id."""

    name: str
    args: tuple[Any, ...]
    basic: bool = False
    """Ordinary inputs: the ones compiled providers (slow to build per shape) are also run on."""


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, dtype: torch.dtype, device: torch.device, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, generator=_g(seed)) * scale).to(device=device, dtype=dtype)


def _sprinkle(x: torch.Tensor, values: tuple[float, ...], seed: int) -> torch.Tensor:
    flat = x.clone().reshape(-1)
    idx = torch.randperm(flat.numel(), generator=_g(seed))[: len(values)]
    flat[idx.to(flat.device)] = torch.tensor(values, dtype=torch.float64).to(dtype=x.dtype, device=x.device)
    return flat.reshape(x.shape)


def rows_samples(op: str, dtype: torch.dtype, device: torch.device) -> Iterator[Sample]:
    """Samples of the row ops (``rms_norm``, ``fused_add_rms_norm``, ``silu_mul``)."""
    from inferensics.kernels.layout import MAX_HIDDEN

    def args(x: torch.Tensor, seed: int = 1) -> tuple[Any, ...]:
        n = x.shape[-1] if x.dim() else 1
        w = 1.0 + _randn(n, dtype=dtype, device=device, seed=seed, scale=0.1)
        if op == "rms_norm":
            return x, w, 1e-6
        if op == "fused_add_rms_norm":
            return x, _randn(*x.shape, dtype=dtype, device=device, seed=seed + 1), w, 1e-6
        return (x,)

    def r(*s: int, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
        return _randn(*s, dtype=dtype, device=device, seed=seed, scale=scale)

    yield Sample("basic", args(r(4, 64)), basic=True)
    yield Sample("odd", args(r(7, 38, seed=2)))
    yield Sample("unaligned_wide", args(r(3, 1030, seed=3)))
    yield Sample("leading_dims", args(r(2, 3, 40, seed=4)))
    yield Sample("single_row", args(r(1, 16, seed=5)))
    yield Sample("empty_rows", args(r(0, 32)))
    yield Sample("row_strided", args(r(5, 96, seed=6)[:, :48]))
    yield Sample("last_dim_strided", args(r(6, 64, seed=7)[:, ::2]))
    yield Sample("transposed", args(r(32, 6, seed=8).t()))
    if op != "silu_mul":
        yield Sample("zero_dim", args(r(seed=9).reshape(())))
        yield Sample("widest_row", args(r(1, MAX_HIDDEN, seed=10)))
        yield Sample("too_wide", args(r(1, MAX_HIDDEN + 2, seed=11)))
    yield Sample("extremal", args(_sprinkle(r(6, 32, seed=12), EXTREMAL, 12)))
    yield Sample("large_fp16", args(_sprinkle(r(4, 32, seed=13), LARGE_FP16, 13)))


def rotary_samples(dtype: torch.dtype, device: torch.device) -> Iterator[Sample]:
    """Samples of ``rotary_embedding``."""

    def tables(positions: int, half: int) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / max(half, 1)))
        angles = torch.outer(torch.arange(positions, dtype=torch.float32) * 3.0, freqs)
        return angles.cos().to(device), angles.sin().to(device)

    def r(*s: int, seed: int = 0) -> torch.Tensor:
        return _randn(*s, dtype=dtype, device=device, seed=seed)

    yield Sample("basic_thd", (r(6, 4, 32), *tables(6, 16)), basic=True)
    yield Sample("bhsd", (r(2, 3, 5, 32, seed=1), *tables(5, 16)))
    yield Sample("odd_half", (r(3, 5, 34, seed=2), *tables(3, 17)))
    yield Sample("transposed_heads", (r(4, 7, 32, seed=3).transpose(0, 1), *tables(7, 16)))
    yield Sample("empty", (r(0, 4, 32), *tables(0, 16)))
    yield Sample("cos_strided", (r(4, 2, 32, seed=4), tables(4, 32)[0][:, ::2], tables(4, 32)[1][:, ::2]))
    yield Sample("extremal", (_sprinkle(r(5, 3, 32, seed=5), EXTREMAL, 5), *tables(5, 16)))
    yield Sample("large_fp16", (_sprinkle(r(5, 3, 32, seed=6), LARGE_FP16, 6), *tables(5, 16)))


def paged_samples(dtype: torch.dtype, device: torch.device) -> Iterator[Sample]:
    """Samples of ``paged_decode_attention`` (pages scattered through the cache, ragged lengths)."""

    def make(  # noqa: PLR0917
        lens: list[int], hq: int, hkv: int, d: int = 64, page: int = 16, seed: int = 0, table_dtype: Any = torch.int32
    ) -> tuple[Any, ...]:
        per_seq = max(1, max(-(-n // page) for n in lens) if lens else 1)
        pages = max(1, len(lens) * per_seq)
        table = torch.randperm(pages, generator=_g(seed)).reshape(len(lens), per_seq)
        for b, n in enumerate(lens):  # entries past a sequence's pages: -1, as an allocator leaves them
            table[b, -(-n // page) :] = -1
        return (
            _randn(len(lens), hq, d, dtype=dtype, device=device, seed=seed + 1),
            _randn(pages, page, hkv, d, dtype=dtype, device=device, seed=seed + 2),
            _randn(pages, page, hkv, d, dtype=dtype, device=device, seed=seed + 3),
            table.to(device=device, dtype=table_dtype),
            torch.tensor(lens, dtype=torch.int32, device=device),
            d**-0.5,
        )

    yield Sample("basic_gqa4", make([40, 17], 8, 2), basic=True)
    yield Sample("ragged_and_empty", make([0, 1, 16, 33], 4, 2, seed=1))
    yield Sample("mha", make([20, 5], 2, 2, seed=2))
    yield Sample("gqa8_page8", make([50], 8, 1, page=8, seed=3))
    yield Sample("int64_table", make([19, 31], 4, 1, seed=4, table_dtype=torch.int64))
    yield Sample("long_split", make([700, 300], 4, 2, seed=5))
    # More splits than the merging program combines per step (a second merge step, a partly filled one).
    yield Sample("many_splits", make([2100, 1500], 4, 1, seed=7))
    yield Sample("head_dim_48", make([9], 2, 1, d=48, seed=6))
    q, k, v, t, n, s = make([24, 12], 4, 2, seed=7)
    yield Sample("q_strided", (torch.cat([q, q], dim=-1)[..., :64], k, v, t, n, s))
    q, k, v, t, n, s = make([24, 12], 4, 2, seed=8)
    yield Sample("nan_in_values", (q, k, _sprinkle(v, (float("nan"),), 8), t, n, s))
    yield Sample("large_scores", (q * 100, k, v, t, n, s))
    # HND storage: each (page, KV head) one contiguous block, seen as [pages, page, Hkv, D] (more splits than a
    # merge step takes); and caches that are neither layout (every other page of a larger cache).
    q, k, v, t, n, s = make([700, 300, 0], 8, 2, seed=9)
    hnd = [c.permute(0, 2, 1, 3).contiguous().transpose(1, 2) for c in (k, v)]
    yield Sample("hnd_layout", (q, *hnd, t, n, s))
    q, k, v, t, n, s = make([40, 17], 4, 2, seed=10)
    wide = [torch.stack([c, torch.zeros_like(c)], dim=1).flatten(0, 1)[::2] for c in (k, v)]
    yield Sample("every_other_page", (q, *wide, t, n, s))


SAMPLERS: dict[str, Callable[[torch.dtype, torch.device], Iterator[Sample]]] = {
    "rms_norm": lambda dt, dev: rows_samples("rms_norm", dt, dev),
    "fused_add_rms_norm": lambda dt, dev: rows_samples("fused_add_rms_norm", dt, dev),
    "silu_mul": lambda dt, dev: rows_samples("silu_mul", dt, dev),
    "rotary_embedding": rotary_samples,
    "paged_decode_attention": paged_samples,
}
