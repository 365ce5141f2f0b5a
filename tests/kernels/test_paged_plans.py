"""Every launch-plan variant of the paged decode kernel computes the op: grid order, merge in the last split or
in a second kernel, one split or many (several merge steps, ragged and empty sequences)."""

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
@pytest.mark.parametrize("min_split", [4096, 64], ids=["one_split", "many_splits"])
def test_plan_variants_match_the_reference(kv_fast: bool, merge_kernel: bool, min_split: int) -> None:
    from inferensics.kernels._triton import paged_attention as pa

    shape = {"batch": 3, "context": 1300, "q_heads": 8, "kv_heads": 2, "head_dim": 64, "page": 16}
    args = make_args("paged_decode_attention", shape, torch.float32, DEVICE, seed=3)
    args[4][1] = 700  # ragged
    args[4][2] = 0  # empty: zeros
    plan = pa.Plan(16, min_split, 32, 4, 2, kv_fast, merge_kernel)
    splits, _ = pa.split_plan(3, 2, args[3].shape[1] * 16, pa.sm_count(DEVICE), 16, min_split, 32)
    assert splits == 1 if min_split == 4096 else splits > 8  # one split; more than one merge step
    q, k, v, table, lens, scale = args
    out = pa.run_with_plan(q, k, v, table, lens, scale, plan)
    ref = paged_decode_attention_reference(*args)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert not out[2].any()
