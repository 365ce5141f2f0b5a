"""The fused fingerprint kernel (Triton): one program per span of a row, one read of the output, and the
spans of a row folded on the device by the row's last program.

Imported only when a CUDA output is fingerprinted (or by tests under ``TRITON_INTERPRET=1``); see
:mod:`inferensics.collector.host.fingerprint` for the numbers per row and their semantics.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl


def define_kernel() -> Any:
    """Define the kernel; ``tl`` must be this module's global for Triton's interpreter to patch it."""

    # Parameters stay unannotated: Triton resolves annotations as globals, and only constexpr ones may be.
    @triton.jit(do_not_specialize=["n_cols", "stride_row", "span"])  # type: ignore[untyped-decorator]
    def fingerprint_rows(x_ptr, out_ptr, work_ptr, n_cols, stride_row, span, block: tl.constexpr, fold: tl.constexpr):  # type: ignore[no-untyped-def]  # noqa: PLR0917 (Triton passes positionally)
        # Program p reads columns [c * span, (c + 1) * span) of row r, p = r * ceil(n_cols / span) + c:
        # a row spreads over several programs, so a handful of logits rows still fills the device.
        pid = tl.program_id(0)
        per_row = tl.cdiv(n_cols, span)
        row = pid // per_row
        chunk = pid - row * per_row
        first = chunk * span
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
        nan_total = tl.sum(n_nan, axis=0).to(tl.float64)
        inf_total = tl.sum(n_inf, axis=0).to(tl.float64)
        s_total = tl.sum(s, axis=0)
        ss_total = tl.sum(ss, axis=0)
        amax_top = tl.max(amax, axis=0).to(tl.float64)
        out = out_ptr + row.to(tl.int64) * 6
        if per_row == 1:  # the whole row in one program: its six numbers are the row's
            tl.store(out + 0, nan_total)
            tl.store(out + 1, inf_total)
            tl.store(out + 2, s_total)
            tl.store(out + 3, ss_total)
            tl.store(out + 4, amax_top)
            tl.store(out + 5, arg.to(tl.float64))
        else:
            # The span's seven numbers go to the row's slots in the device work buffer: [count, then seven
            # per span]; the row's last program to arrive (the count says which) folds them into the row's
            # six, so the host reads six numbers per row, not seven per span.
            slot = work_ptr + row.to(tl.int64) * (per_row * 7 + 1)
            part = slot + 1 + chunk.to(tl.int64) * 7
            tl.store(part + 0, nan_total)
            tl.store(part + 1, inf_total)
            tl.store(part + 2, s_total)
            tl.store(part + 3, ss_total)
            tl.store(part + 4, amax_top)
            tl.store(part + 5, arg.to(tl.float64))
            tl.store(part + 6, top.to(tl.float64))
            tl.debug_barrier()  # every thread's stores issued before the release below
            arrived = tl.atomic_add(slot, 1.0, sem="acq_rel")
            if arrived == per_row - 1:
                tl.store(slot, 0.0)  # the count starts at zero for the next launch (stream order)
                c = tl.arange(0, fold)
                f_nan = tl.zeros([fold], dtype=tl.float64)
                f_inf = tl.zeros([fold], dtype=tl.float64)
                f_s = tl.zeros([fold], dtype=tl.float64)
                f_ss = tl.zeros([fold], dtype=tl.float64)
                f_amax = tl.zeros([fold], dtype=tl.float64)
                f_top = tl.full([fold], float("-inf"), dtype=tl.float64)
                f_i = tl.full([fold], 2147483647, dtype=tl.int32)
                f_nan_i = tl.full([fold], 2147483647, dtype=tl.int32)
                for c0 in range(0, per_row, fold):
                    k = c0 + c
                    km = k < per_row
                    p = slot + 1 + k.to(tl.int64) * 7
                    # .cg: from L2, where the other programs' stores are (L1 is not coherent across SMs)
                    k_nan = tl.load(p + 0, mask=km, other=0.0, cache_modifier=".cg")
                    f_nan += k_nan
                    f_inf += tl.load(p + 1, mask=km, other=0.0, cache_modifier=".cg")
                    f_s += tl.load(p + 2, mask=km, other=0.0, cache_modifier=".cg")
                    f_ss += tl.load(p + 3, mask=km, other=0.0, cache_modifier=".cg")
                    f_amax = tl.maximum(f_amax, tl.load(p + 4, mask=km, other=0.0, cache_modifier=".cg"))
                    k_top = tl.load(p + 6, mask=km, other=float("-inf"), cache_modifier=".cg")
                    # The span with the row's largest value, the first such (as within a span above).
                    k_take = km & ((k_top > f_top) | (f_i == 2147483647))
                    f_top = tl.where(k_take, k_top, f_top)
                    f_i = tl.where(k_take, k, f_i)
                    f_nan_i = tl.minimum(f_nan_i, tl.where(km & (k_nan > 0.0), k, 2147483647))
                row_top = tl.max(f_top, axis=0)
                pick = tl.min(tl.where((f_top == row_top) & (f_i < 2147483647), f_i, 2147483647), axis=0)
                nan_span = tl.min(f_nan_i, axis=0)
                pick = tl.where(nan_span < 2147483647, nan_span, pick)  # a NaN: the first span holding one
                row_arg = tl.load(slot + 1 + pick.to(tl.int64) * 7 + 5, cache_modifier=".cg")
                tl.store(out + 0, tl.sum(f_nan, axis=0))
                tl.store(out + 1, tl.sum(f_inf, axis=0))
                tl.store(out + 2, tl.sum(f_s, axis=0))
                tl.store(out + 3, tl.sum(f_ss, axis=0))
                tl.store(out + 4, tl.max(f_amax, axis=0))
                tl.store(out + 5, row_arg)

    return fingerprint_rows
