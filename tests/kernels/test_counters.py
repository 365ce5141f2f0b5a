"""The last-split merge's counters are kept between calls (kernels/_triton/counters.py): zeroed once, left zeroed
by every launch, never shared by launches that may run at the same time."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from inferensics.kernels._triton.counters import COUNTERS, STREAM_SLICE, CounterPool
from inferensics.kernels._triton.device_facts import sm_count
from inferensics.kernels.ops.attention import paged_decode_attention_reference
from inferensics.kernels.samples import make_args

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="streams and CUDA-graph capture need a GPU")

# NumPy warns on exp2(-inf - -inf) in the interpreter where an empty sequence's merge weighs nothing (masked).
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _args(batch: int, seed: int) -> tuple[Any, ...]:
    shape = {"batch": batch, "context": 700, "q_heads": 8, "kv_heads": 2, "head_dim": 64, "page": 16}
    args = make_args("paged_decode_attention", shape, torch.float32, DEVICE, seed=seed)
    args[4][0] = 333  # ragged
    return args


def _run(args: tuple[Any, ...], plan: Any) -> torch.Tensor:
    from inferensics.kernels._triton import paged_attention as pa

    q, k, v, table, lens, scale = args
    return pa.run_with_plan(q, k, v, table, lens, scale, plan)


def test_calls_reuse_their_streams_counters_and_leave_them_zeroed(monkeypatch: pytest.MonkeyPatch) -> None:
    from inferensics.kernels._triton import paged_attention as pa

    pool = CounterPool()
    monkeypatch.setattr(pa, "COUNTERS", pool)
    plan = pa.Plan(16, 32, 32, 4, 2, True, False)  # many splits, merged by the last split of each group
    slices = set()
    for batch, seed in ((3, 1), (2, 2), (3, 3)):  # a later call finds the counters its predecessor used
        q, k, v, table, lens, scale = args = _args(batch, seed)
        splits, _ = pa.split_plan(batch, 2, table.shape[1] * 16, sm_count(DEVICE), 16, 32, 32)
        assert splits > pa.MERGE_SPLITS  # more than one merge step
        out = pa.run_with_plan(q, k, v, table, lens, scale, plan)
        torch.testing.assert_close(out, paged_decode_attention_reference(*args), rtol=1e-4, atol=1e-5)
        counters = pool.take(DEVICE, STREAM_SLICE)
        slices.add(counters.data_ptr())
        assert not counters.any()  # every counter back at zero
    assert len(slices) == 1
    assert pool.stats == {"chunks": 1, "stream_slices": 1, "captured_slices": 0, "captured_memsets": 0}


def test_a_call_needing_more_counters_than_its_slice_gets_a_fresh_zeroed_one() -> None:
    cpu = torch.device("cpu")
    pool = CounterPool(chunk=STREAM_SLICE + 100)
    first = pool.take(cpu, 5)
    assert pool.take(cpu, 7).data_ptr() == first.data_ptr()
    first.fill_(1)  # a slice left in use by a launch still queued is never handed out again
    big = pool.take(cpu, STREAM_SLICE + 1)  # does not fit the chunk's 100 left: a chunk of its own
    assert big.numel() == STREAM_SLICE + 1
    assert not big.any()
    assert pool.take(cpu, 3).data_ptr() == big.data_ptr()
    assert pool.stats["chunks"] == 2
    assert pool.stats["stream_slices"] == 2


@GPU
def test_streams_get_their_own_counters_and_concurrent_calls_give_the_sequential_answers() -> None:
    from inferensics.kernels._triton import paged_attention as pa

    pool = COUNTERS
    plan = pa.Plan(16, 32, 32, 4, 2, True, False)
    samples = [_args(3, seed) for seed in range(4)]
    want = [_run(a, plan) for a in samples]
    streams = [torch.cuda.Stream() for _ in samples]  # type: ignore[no-untyped-call]
    ptrs = set()
    for _ in range(3):
        got = []
        for a, stream in zip(samples, streams, strict=True):
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                got.append(_run(a, plan))
                ptrs.add(pool.take(DEVICE, 6).data_ptr())
        torch.cuda.synchronize()
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=0, atol=0)
    assert len(ptrs) == len(streams)


@GPU
def test_each_captured_launch_owns_its_counters_and_records_no_memset() -> None:
    from inferensics.kernels._triton import paged_attention as pa

    pool = COUNTERS
    plan = pa.Plan(16, 32, 32, 4, 2, True, False)
    samples = [_args(3, seed) for seed in (7, 8)]
    want = [_run(a, plan) for a in samples]  # eager first: the chunk exists before capture
    torch.cuda.synchronize()
    before = dict(pool.stats)
    graphs, outs = [], []
    for a in samples:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs.append(_run(a, plan))
        graphs.append(graph)
    assert pool.stats["captured_slices"] == before["captured_slices"] + 2
    assert pool.stats["captured_memsets"] == before["captured_memsets"]
    streams = [torch.cuda.Stream() for _ in graphs]  # type: ignore[no-untyped-call]
    for _ in range(5):  # the two graphs replayed at the same time on two streams
        for graph, stream in zip(graphs, streams, strict=True):
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                graph.replay()
        torch.cuda.synchronize()
        for o, w in zip(outs, want, strict=True):
            torch.testing.assert_close(o, w, rtol=0, atol=0)
