"""Every launch-plan variant of the paged decode kernel computes the op: grid order, merge in the last split or
in a second kernel, one split or many (several merge steps of either merge, ragged and empty sequences), caches
stored NHD or HND."""

from __future__ import annotations

import pytest
import torch

from inferensics.kernels.ops.attention import paged_decode_attention_reference
from inferensics.kernels.samples import make_args

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# NumPy warns on exp2(-inf - -inf) in the interpreter where an empty sequence's merge weighs nothing (masked).
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.mark.parametrize("kv_fast", [True, False], ids=["kv_fast", "seq_fast"])
@pytest.mark.parametrize("merge_kernel", [False, True], ids=["last_merges", "merge_kernel"])
@pytest.mark.parametrize("min_split", [4096, 32], ids=["one_split", "many_splits"])
def test_plan_variants_match_the_reference(kv_fast: bool, merge_kernel: bool, min_split: int) -> None:
    from inferensics.kernels._triton import paged_attention as pa
    from inferensics.kernels._triton.device_facts import sm_count

    shape = {"batch": 3, "context": 1300, "q_heads": 8, "kv_heads": 2, "head_dim": 64, "page": 16}
    args = make_args("paged_decode_attention", shape, torch.float32, DEVICE, seed=3)
    args[4][1] = 700  # ragged
    args[4][2] = 0  # empty: zeros
    plan = pa.Plan(16, min_split, 32, 4, 2, kv_fast, merge_kernel)
    splits, _ = pa.split_plan(3, 2, args[3].shape[1] * 16, sm_count(DEVICE), 16, min_split, 32)
    # One split; or more than one step of either merge (8 splits a step in the last split, 32 in the kernel).
    assert splits == 1 if min_split == 4096 else splits > pa.KERNEL_MERGE_SPLITS
    q, k, v, table, lens, scale = args
    out = pa.run_with_plan(q, k, v, table, lens, scale, plan)
    ref = paged_decode_attention_reference(*args)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert not out[2].any()


@pytest.mark.parametrize("merge_kernel", [False, True], ids=["last_merges", "merge_kernel"])
def test_hnd_storage_gives_the_nhd_answer(merge_kernel: bool) -> None:
    # The same pages stored [pages, Hkv, page, D] and passed as its transpose(1, 2) view.
    from inferensics.kernels._triton import paged_attention as pa

    shape = {"batch": 2, "context": 900, "q_heads": 8, "kv_heads": 2, "head_dim": 64, "page": 16}
    q, k, v, table, lens, scale = make_args("paged_decode_attention", shape, torch.float32, DEVICE, seed=5)
    k_hnd, v_hnd = (c.permute(0, 2, 1, 3).contiguous().transpose(1, 2) for c in (k, v))
    assert k_hnd.stride()[1:] == (64, 16 * 64, 1)  # the tokens of a (page, head) contiguous
    plan = pa.Plan(16, 64, 32, 4, 2, True, merge_kernel)
    nhd = pa.run_with_plan(q, k, v, table, lens, scale, plan)
    hnd = pa.run_with_plan(q, k_hnd, v_hnd, table, lens, scale, plan)
    torch.testing.assert_close(hnd, nhd, rtol=0, atol=0)


def test_fractional_waves_give_the_split_count_they_were_swept_for() -> None:
    # The sweep names a split count s by waves = (s x units - 0.5) / SMs; the measured table stores such values.
    from inferensics.kernels._triton import paged_attention as pa

    assert pa.split_plan(8, 8, 32768, 132, 3.875, 64, 64) == (8, 4096)  # the batch 8 / 32k row
    for units, splits in ((8, 47), (64, 10), (512, 9)):
        waves = round((splits * units - 0.5) / 132, 4)
        assert pa.split_plan(units // 8, 8, 32768, 132, waves, 64, 16)[0] == splits
    assert pa.split_plan(64, 8, 32768, 132, 16, 64, 64) == pa.split_plan(64, 8, 32768, 132, 16.0, 64, 64) == (5, 6592)


@pytest.mark.parametrize("block_n", [16, 64], ids=["one_page_steps", "four_page_steps"])
@pytest.mark.parametrize("min_split", [4096, 32], ids=["one_split", "many_splits"])
def test_prefetched_page_numbers_give_the_same_bits(block_n: int, min_split: int) -> None:
    # The next step's page numbers loaded a step early (the last step's prefetch masked off) change only when the
    # table is read, never what is computed: ragged, empty and page-unaligned sequences give the same bits.
    from inferensics.kernels._triton import paged_attention as pa

    shape = {"batch": 3, "context": 1000, "q_heads": 8, "kv_heads": 2, "head_dim": 64, "page": 16}
    q, k, v, table, lens, scale = make_args("paged_decode_attention", shape, torch.float32, DEVICE, seed=11)
    lens[1], lens[2] = 333, 0
    plain = pa.Plan(16, min_split, block_n, 4, 3, True, True)
    prefetch = pa.Plan(16, min_split, block_n, 4, 3, True, True, prefetch_pages=True)
    expected = pa.run_with_plan(q, k, v, table, lens, scale, plain)
    torch.testing.assert_close(pa.run_with_plan(q, k, v, table, lens, scale, prefetch), expected, rtol=0, atol=0)
    ref = paged_decode_attention_reference(q, k, v, table, lens, scale)
    torch.testing.assert_close(expected, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
    reason="programmatic dependent launch needs a Hopper or newer GPU",
)
# torch 2.11's Inductor warns on import (torch.jit.script_method deprecated): not this test's subject.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_pdl_merge_gives_the_plain_merges_answer_eager_and_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    # The merge kernel as a programmatic dependent launch: the same bits as the plain launch, and under
    # torch.compile (whose launch takes no launch_pdl) the kernel's grid-dependency wait is harmless.
    from inferensics.kernels._triton import paged_attention as pa
    from inferensics.kernels._triton.device_facts import sm_count

    shape = {"batch": 2, "context": 4096, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page": 16}
    q, k, v, table, lens, scale = make_args("paged_decode_attention", shape, torch.bfloat16, DEVICE, seed=7)
    lens[1] = 1000
    plain = pa.Plan(8, 64, 64, 4, 2, True, True, False)
    pdl = pa.Plan(8, 64, 64, 4, 2, True, True, True)
    assert pa.split_plan(2, 8, table.shape[1] * 16, sm_count(DEVICE), 8, 64, 64)[0] > 1
    expected = pa.run_with_plan(q, k, v, table, lens, scale, plain)
    for _ in range(3):
        torch.testing.assert_close(pa.run_with_plan(q, k, v, table, lens, scale, pdl), expected, rtol=0, atol=0)
    monkeypatch.setattr(pa, "choose_plan", lambda *a: (pdl, True))
    eager_op = pa.paged_decode_attention_triton(q, k, v, table, lens, scale)
    torch.testing.assert_close(eager_op, expected, rtol=0, atol=0)
    compiled = torch.compile(lambda *a: pa.paged_decode_attention_triton(*a) * 1.0, dynamic=False)
    torch.testing.assert_close(compiled(q, k, v, table, lens, scale), expected, rtol=0, atol=0)
