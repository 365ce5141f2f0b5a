"""The fused fingerprint kernel (Triton): one program per span of a row, one read of the output.

Imported only when a CUDA output is fingerprinted (or by tests under ``TRITON_INTERPRET=1``); see
:mod:`inferensics.collector.host.fingerprint` for the numbers per row and their semantics, and for how the
host folds the spans of a row (:func:`~inferensics.collector.host.fingerprint.fold_parts`).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl


def define_kernel() -> Any:
    """Define the kernel; ``tl`` must be this module's global for Triton's interpreter to patch it."""

    # Parameters stay unannotated: Triton resolves annotations as globals, and only constexpr ones may be.
    @triton.jit(do_not_specialize=["n_cols", "stride_row", "span"])  # type: ignore[untyped-decorator]
    def fingerprint_rows(x_ptr, out_ptr, n_cols, stride_row, span, block: tl.constexpr):  # type: ignore[no-untyped-def]  # noqa: PLR0917 (Triton passes positionally)
        # Program p reads columns [c * span, (c + 1) * span) of row r, p = r * ceil(n_cols / span) + c:
        # a row spreads over several programs, so a handful of logits rows still fills the device.
        pid = tl.program_id(0)
        per_row = tl.cdiv(n_cols, span)
        row = pid // per_row
        first = (pid - row * per_row) * span
        base = x_ptr + row.to(tl.int64) * stride_row
        offs = tl.arange(0, block)
        n_nan = tl.zeros([block], dtype=tl.int32)
        n_inf = tl.zeros([block], dtype=tl.int32)
        s = tl.zeros([block], dtype=tl.float64)
        ss = tl.zeros([block], dtype=tl.float64)
        amax = tl.zeros([block], dtype=tl.float32)
        best = tl.full([block], float("-inf"), dtype=tl.float32)
        best_i = tl.full([block], 2147483647, dtype=tl.int32)
        nan_i = tl.full([block], 2147483647, dtype=tl.int32)
        for start in range(0, span, block):
            idx = first + start + offs
            m = idx < n_cols
            v = tl.load(base + idx, mask=m, other=0.0).to(tl.float32)
            is_nan = (v != v) & m  # noqa: PLR0124 (NaN test; no isnan in the interpreter)
            is_inf = (tl.abs(v) == float("inf")) & m
            ok = m & (v == v)  # noqa: PLR0124
            z = tl.where(is_inf | is_nan, 0.0, v)
            n_nan += is_nan.to(tl.int32)
            n_inf += is_inf.to(tl.int32)
            zd = z.to(tl.float64)
            s += zd
            ss += zd * zd
            amax = tl.maximum(amax, tl.abs(z))
            # Per lane, indices only grow: a strictly larger value (or the lane's first valid one, which
            # may be -inf) takes over, so each lane holds its first maximum.
            vv = tl.where(ok, v, float("-inf"))
            take = ok & ((vv > best) | (best_i == 2147483647))
            best = tl.where(take, vv, best)
            best_i = tl.where(take, idx, best_i)
            nan_i = tl.minimum(nan_i, tl.where(is_nan, idx, 2147483647))
        top = tl.max(best, axis=0)
        arg = tl.min(tl.where((best == top) & (best_i < 2147483647), best_i, 2147483647), axis=0)
        first_nan = tl.min(nan_i, axis=0)
        arg = tl.where(first_nan < 2147483647, first_nan, arg)
        out = out_ptr + pid.to(tl.int64) * 7
        tl.store(out + 0, tl.sum(n_nan, axis=0).to(tl.float64))
        tl.store(out + 1, tl.sum(n_inf, axis=0).to(tl.float64))
        tl.store(out + 2, tl.sum(s, axis=0))
        tl.store(out + 3, tl.sum(ss, axis=0))
        tl.store(out + 4, tl.max(amax, axis=0).to(tl.float64))
        tl.store(out + 5, arg.to(tl.float64))
        tl.store(out + 6, top.to(tl.float64))

    return fingerprint_rows
