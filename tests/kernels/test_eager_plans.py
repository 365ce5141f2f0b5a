"""Eager calls of a Triton provider replay a launch plan per argument signature (``kernels/_triton/launches.py``).

The plans themselves run on a GPU only (Inductor's static CUDA launcher): those tests skip without one. How a
recording becomes a plan, or is refused, is plain torch and runs everywhere: the CPU tests below record bodies that
launch no kernel (on a GPU the same code maps each launch's arguments).
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

import pytest
import torch

from inferensics import kernels
from inferensics.kernels.requirements import CallContext

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device (plans launch through the static CUDA launcher)")


def _launches() -> Any:
    return importlib.import_module("inferensics.kernels._triton.launches")


# --- recording, everywhere ----------------------------------------------------------------------------------


def test_a_body_that_only_allocates_and_views_becomes_a_plan_that_returns_the_same_layout() -> None:
    launches = _launches()

    def body(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.empty((x.shape[0], 2 * x.shape[1]), dtype=x.dtype, device=x.device)
        return out, out[:, 1::2]  # an empty input launches nothing: the outputs are all there is

    plans = launches.EagerPlans(body, "test_views")
    x = torch.randn(0, 4)
    plans._record(("k",), (x,))
    plan = plans.plans[("k",)]
    assert isinstance(plan, launches.Plan), launches.plan_stats()["reasons"]
    whole, view = plan.run((x,))
    assert (whole.shape, whole.stride(), whole.dtype) == ((0, 8), (8, 1), x.dtype)
    assert (view.shape, view.stride(), view.storage_offset()) == ((0, 4), (8, 2), 1)
    assert view.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()


def test_a_body_that_computes_with_torch_is_refused_and_the_op_named() -> None:
    launches = _launches()
    before = launches.plan_stats()["refused"]

    def body(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)  # a fill: a plan replays allocations and launches only
        return out

    plans = launches.EagerPlans(body, "test_fill")
    x = torch.randn(3, 4)
    out = plans._record(("k",), (x,))
    assert torch.equal(out, torch.zeros(3, 4))  # the recording call itself is served by the body
    assert plans.plans[("k",)] is None
    stats = launches.plan_stats()
    assert stats["refused"] == before + 1
    assert "zero" in stats["reasons"]["test_fill"] or "fill" in stats["reasons"]["test_fill"]


def test_a_body_returning_its_input_is_refused() -> None:
    launches = _launches()
    plans = launches.EagerPlans(lambda x: x, "test_identity")
    plans._record(("k",), (torch.randn(2),))
    assert plans.plans[("k",)] is None
    assert "did not allocate" in launches.plan_stats()["reasons"]["test_identity"]


def test_cpu_arguments_have_no_signature_and_run_the_body() -> None:
    launches = _launches()
    calls = []

    def body(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x + 1

    plans = launches.EagerPlans(body, "test_cpu")
    assert launches.signature((torch.randn(2), 1e-6)) is None
    for _ in range(3):
        plans(torch.randn(2))
    assert len(calls) == 3
    assert plans.plans == {}


def test_launches_are_noted_only_on_the_recording_thread() -> None:
    launches = _launches()
    noted: list[Any] = []
    launches._RECORDING[threading.get_ident()] = noted
    try:
        other: list[Any] = []

        def elsewhere() -> None:
            other.append(launches._RECORDING.get(threading.get_ident()))

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert other == [None]
    finally:
        launches._RECORDING.pop(threading.get_ident(), None)


# --- plans on a GPU -----------------------------------------------------------------------------------------


def _provider(op: str) -> Any:
    return kernels.registry().op(op).providers["triton"].fn


def _cases(device: torch.device) -> list[tuple[str, tuple[Any, ...]]]:
    g = torch.Generator(device="cpu").manual_seed(5)

    def r(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    wide = r(8, 4096 + 8)
    return [
        ("rms_norm", (r(8, 4096), r(4096), 1e-6)),
        ("rms_norm", (r(3, 1000, dtype=torch.float16), r(1000, dtype=torch.float16), 1e-5)),
        ("rms_norm", (wide[:, 1:4097], r(4096), 1e-6)),  # rows of another stride, the address 2 bytes off 16
        ("fused_add_rms_norm", (r(8, 4096), r(8, 4096), r(4096), 1e-6)),
        ("silu_mul", (r(8, 2 * 14336),)),
        ("silu_mul", (r(5, 2 * 1000, dtype=torch.float32),)),
        ("rotary_embedding", (r(8, 4, 128), r(8, 64, dtype=torch.float32), r(8, 64, dtype=torch.float32))),
    ]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.stride() == b.stride() and torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return all(_same(x, y) for x, y in zip(a, b, strict=True))


@needs_cuda
def test_planned_calls_give_the_ops_bits_for_every_row_op() -> None:
    launches = _launches()
    device = torch.device("cuda")
    for op, args in _cases(device):
        fn = _provider(op)
        want = fn.entry()(*args)  # through the torch.library op: never a plan
        plans_before = launches.plan_stats()["plans"]
        outs = [fn(*args) for _ in range(4)]  # first: the body; second: recorded; then the plan
        torch.cuda.synchronize()
        assert launches.plan_stats()["plans"] == plans_before + 1, (op, launches.plan_stats()["reasons"])
        for out in outs:
            assert _same(out, want), op


@needs_cuda
def test_a_plan_reads_each_calls_own_inputs() -> None:
    fn = _provider("rms_norm")
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    xs = [torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(5)]
    got = [fn(x, w, 1e-6) for x in xs]
    want = [fn.entry()(x, w, 1e-6) for x in xs]
    for g, e in zip(got, want, strict=True):
        assert _same(g, e)


@needs_cuda
def test_a_plan_launches_on_the_current_stream() -> None:
    fn = _provider("silu_mul")
    x = torch.randn(8, 2 * 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        fn(x)
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    big = torch.randn(4096, 4096, device="cuda")
    with torch.cuda.stream(stream):
        for _ in range(20):
            big = big @ big.T / 4096  # keep the side stream busy, so a launch on the default stream would overtake
        y = x * 1  # written on the side stream, then read by the plan's launch on it
        out = fn(y)
    stream.synchronize()
    assert _same(out, fn.entry()(x))


@needs_cuda
def test_planned_calls_are_captured_by_a_cuda_graph() -> None:
    fn = _provider("rms_norm")
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        fn(x, w, 1e-6)  # planned before the capture
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side), torch.cuda.graph(graph):
        out = fn(x, w, 1e-6)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert _same(out, fn.entry()(x, w, 1e-6))


@needs_cuda
def test_paged_attention_is_not_planned_and_stays_right() -> None:
    launches = _launches()
    from tests.kernels.samples import paged_samples

    op = kernels.registry().op("paged_decode_attention")
    fn = op.providers["triton"].fn
    before = launches.plan_stats()
    for sample in paged_samples(torch.bfloat16, torch.device("cuda")):
        if not op.providers["triton"].supports(sample.args, CallContext.of(sample.args))[0]:
            continue  # e.g. a head size the kernel does not take: the registry serves it elsewhere
        want = fn.entry()(*sample.args)  # type: ignore[attr-defined]  # a Triton provider: its op
        for _ in range(3):
            assert _same(fn(*sample.args), want), sample.name
    after = launches.plan_stats()
    assert (after["plans"], after["refused"]) == (before["plans"], before["refused"])
