"""Our Triton providers under a compile with dynamic shapes: the row count is symbolic there.

Found on an H100 (torch 2.11): a bundle build that compiled the registry MLP at 8 and then 32 tokens traced
``rms_norm`` with a symbolic row count, and the measured table's lookup raised ``TypeError: unhashable type:
non-nested SymInt`` inside the compile. The row bucket only picks a tuning, so a symbolic count takes its hint's
bucket without a guard; the columns size the kernel's blocks, so a compile specialises on them.

Paged attention's split plan follows from the batch and the block table's width, so with either symbolic the graph
calls the kernel opaquely (one graph for every decode batch and context, not one per size).

In CI the tables' lookups run against a real ``ShapeEnv`` (the tables apply on sm_90 only, so ``is_sm90`` is
patched: no GPU here), and the opaque attention op runs in a compiled graph through Triton's interpreter (called from
Inductor's CPU code); the registry's compiled paths run where there is a GPU (a traced-in Triton kernel cannot run
in the interpreter).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch._dynamo.source import ConstantSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

from inferensics import kernels
from inferensics.kernels.samples import make_args

HAS_CUDA = torch.cuda.is_available()


def _symbolic(value: int) -> tuple[torch.SymInt, ShapeEnv]:
    env = ShapeEnv()
    symbol = env.create_symbol(value, source=ConstantSource("rows"), dynamic_dim=DimDynamic.DYNAMIC)
    return env.create_symintnode(symbol, hint=value), env  # type: ignore[return-value]


def test_a_symbolic_row_count_takes_its_hints_bucket_without_a_guard() -> None:
    from inferensics.kernels._triton.norm import rows_key

    rows, env = _symbolic(9)
    assert isinstance(rows, torch.SymInt)
    assert rows_key(rows) == rows_key(9) == 16  # type: ignore[arg-type]
    assert rows_key(1) == 1
    assert env.guards == []  # the graph stays general in the rows


def test_the_measured_table_accepts_a_symbolic_row_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from inferensics.kernels._triton import norm

    monkeypatch.setattr(norm, "is_sm90", lambda device: True)
    key = next(k for k in norm.H200_CONFIGS if k[2] == 8)  # (residual, columns, rows bucket)
    rows, env = _symbolic(7)
    assert norm.measured_config(torch.device("cuda"), key[0], key[1], rows) == norm.H200_CONFIGS[key]  # type: ignore[arg-type]
    assert env.guards == []


def _shape(op: str, size: int) -> dict[str, int]:
    if op == "rotary_embedding":
        # 4 heads, a count no row size here takes: Dynamo's duck sizing gives equal sizes one symbol, and the
        # kernel's guard on the heads would then fix the first compile's tokens too (seen on an H100 at 8 and 8).
        return {"tokens": size, "heads": 4, "head_dim": 128}
    if op == "paged_decode_attention":
        return {"batch": size, "context": 100 * size, "q_heads": 8, "kv_heads": 2, "head_dim": 128, "page": 16}
    return {"tokens": size, "hidden": 1024}


def _served(op: str) -> Callable[..., Any]:
    """What a model does with the op: call it through the registry, then compute on."""
    semantic = kernels.registry().op(op)

    def serve(*args: Any) -> Any:
        out = semantic(*args)
        return tuple(o * 2 for o in out) if isinstance(out, tuple) else out * 2

    return serve


def _compiled_decisions(op: str, sizes: tuple[int, ...]) -> tuple[list[Any], list[int]]:
    """Serve ``op`` compiled with ``dynamic=True`` at each size on CUDA (each output checked against the op run
    eagerly); the compiled decisions the registry recorded meanwhile, and the frames compiled after each size."""
    from torch._dynamo.testing import CompileCounterWithBackend

    device = torch.device("cuda")
    semantic = kernels.registry().op(op)
    # Decisions are kept per signature, and another test in this process may have compiled the same signature
    # (symbols are named alike across compiles): this compile's are those with a compile id not seen before.
    before = {d.compile_id for d in semantic.log.snapshot() if d.compiled}
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(_served(op), backend=counter, dynamic=True)
    compiles = []
    for size in sizes:
        args = make_args(op, _shape(op, size), torch.bfloat16, device, seed=size)
        torch.testing.assert_close(compiled(*args), _served(op)(*args), atol=2e-2, rtol=2e-2)
        compiles.append(counter.frame_count)
    return [d for d in semantic.log.snapshot() if d.compiled and d.op == op and d.compile_id not in before], compiles


@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU: Triton's interpreter cannot run inside a compiled graph")
@pytest.mark.parametrize("op", ["rms_norm", "fused_add_rms_norm", "silu_mul", "rotary_embedding"])
def test_one_dynamic_graph_serves_every_row_count_through_our_kernel(op: str) -> None:
    decisions, compiles = _compiled_decisions(op, (8, 32, 5))
    assert decisions
    assert {(d.provider, d.fallback) for d in decisions} == {("triton", False)}, decisions
    assert all(re.search(r"\[s\d+", d.signature) for d in decisions), decisions  # symbolic rows: one graph for all
    assert compiles[1:] == [compiles[0]] * 2, compiles
    # One call in one graph: one signature, with the columns the kernel's launch specialised (Dynamo's pass and
    # AOTAutograd's record the same; before, Dynamo's kept its symbolic columns and the Kernels page counted two).
    assert len({d.signature for d in decisions}) == 1, decisions


def _paged(batch: int, context: int, device: torch.device) -> tuple[Any, ...]:
    # kv_heads 2 and batches other than 2: Dynamo's duck sizing would otherwise tie the batch to the KV heads.
    shape = {"batch": batch, "context": context, "q_heads": 4, "kv_heads": 2, "head_dim": 64, "page": 16}
    return make_args("paged_decode_attention", shape, torch.float32, device, seed=batch)


def test_paged_attention_with_a_symbolic_batch_or_width_is_an_opaque_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # Traced in, the kernel would pin a graph to one batch and one table width (its split plan follows from
    # them); with either symbolic the graph calls it opaquely, with both fixed it is traced in.
    from torch.fx.experimental.proxy_tensor import make_fx

    from inferensics.kernels._triton import paged_attention as pa

    args = _paged(3, 300, torch.device("cpu"))
    graph = make_fx(pa.paged_decode_attention_triton, tracing_mode="symbolic")(*args)
    called = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert called == [torch.ops.inferensics.paged_decode_attention_runtime.default], called

    traced: list[tuple[int, ...]] = []

    def record(q: torch.Tensor, *rest: Any) -> torch.Tensor:
        traced.append(tuple(q.shape))
        return q.new_zeros(q.shape)

    monkeypatch.setattr(pa, "paged_decode_attention_traced", record)
    pa.paged_decode_attention_triton(*args)
    assert traced == [(3, 4, 64)]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Inductor's CPU compile touches torch.jit
def test_one_compiled_graph_serves_every_batch_and_context(device: torch.device) -> None:
    # The opaque call reads its sizes when it runs: one graph for batches 3, 5, 6 and table widths 19, 33, 9, each
    # result the eager kernel's bits (here through Triton's interpreter, called from Inductor's CPU code).
    from torch._dynamo.testing import CompileCounterWithBackend

    from inferensics.kernels._triton import paged_attention as pa

    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(
        lambda *a: torch.ops.inferensics.paged_decode_attention_runtime(*a) * 2, backend=counter, dynamic=True
    )
    compiles = []
    for batch, context in ((3, 300), (5, 520), (6, 140)):
        args = _paged(batch, context, device)
        torch.testing.assert_close(compiled(*args), pa.paged_decode_attention_triton(*args) * 2, rtol=0, atol=0)
        compiles.append(counter.frame_count)
    # (the first compile may count twice: Dynamo restarts it once to specialise the float scale for Inductor)
    assert compiles[0] >= 1
    assert compiles[1:] == [compiles[0]] * 2, compiles


@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU: Triton's interpreter cannot run inside a compiled graph")
def test_paged_attention_under_dynamic_shapes_is_one_graph_for_every_batch() -> None:
    # Through the registry (the provider is chosen on fake tensors with a symbolic batch and table width): one
    # graph serves batches 3, 5 and 6 at contexts 300, 500 and 600 through our kernel, every result right.
    decisions, compiles = _compiled_decisions("paged_decode_attention", (3, 5, 6))
    assert compiles[1:] == [compiles[0]] * 2, compiles  # no compile after the first batch's
    assert decisions
    assert {(d.provider, d.fallback) for d in decisions} == {("triton", False)}, decisions


def test_a_compiled_decision_names_the_sizes_its_provider_specialised(monkeypatch: pytest.MonkeyPatch) -> None:
    # Our Triton row ops size their blocks from the columns, so tracing one adds a guard on them, and rotary's
    # check of the cos width against half the head size is settled by that guard later in the compile. Before:
    # Dynamo's pass recorded a call as float32[s0,s1] with its symbolic widths (decided before the provider ran),
    # AOTAutograd's trace as float32[s0,64]; and a width a guard had fixed was still written with its strides
    # (float32[64]/s1 against float32[64]). One call in the graph, two or three signatures in the compile's
    # artifacts, its events and the Kernels page (seen on an H100 for rms_norm and rotary). Now the compile's
    # decisions are signed when it ends. A CPU provider stands in for the Triton launch (a traced-in Triton kernel
    # cannot run in the interpreter); aot_eager runs both passes, caches off.
    import torch._functorch.config

    from inferensics.kernels import DecisionLog, Provider, Requirements, SemanticOp, ToleranceSpec, _torch_adapter
    from inferensics.kernels.ops.common import rows_bucket

    @torch.library.custom_op("inferensics_test::columns_sized_kernel", mutates_args=())
    def kernel(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return x * w + c.sum()

    @kernel.register_fake
    def _(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    def provider(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        if c.shape[1] != x.shape[1] // 2:  # as rotary's check of cos against half the head size
            raise ValueError("c must have half the columns of x")
        int(x.shape[1])  # sizes its launch from the columns, as a Triton launch does: a guard while tracing
        out: torch.Tensor = kernel(x, w, c)
        return out

    op = SemanticOp(
        "test_columns_sized_op",
        "(Tensor x, Tensor w, Tensor c) -> Tensor",
        lambda x, w, c: x * w + c.sum(),
        tolerance=ToleranceSpec(),
        bucket=rows_bucket,
        doc="scales x by w, plus the sum of c",
        log=DecisionLog(),
    )
    op.register(Provider("kernel", "triton", provider, Requirements()))
    emitted: list[tuple[str, str]] = []
    monkeypatch.setattr(
        _torch_adapter,
        "emit_decisions",
        lambda payload, *_: emitted.extend((d["compile_id"], d["signature"]) for d in payload()),
    )
    compiled = torch.compile(lambda x, w, c: op(x, w, c) + 1, backend="aot_eager", dynamic=True)
    with torch._functorch.config.patch(enable_autograd_cache=False):
        for rows in (8, 16, 5):
            x, w, c = torch.ones(rows, 64), torch.full((64,), 2.0), torch.zeros(3, 32)
            torch.testing.assert_close(compiled(x, w, c), torch.full((rows, 64), 3.0))
    signatures = {d.signature for d in op.log.snapshot() if d.compiled}
    assert len(signatures) == 1, signatures  # one call in one graph: one signature
    (sig,) = signatures
    # rows symbolic; the columns, the weight and c's width as the guards fixed them (c's rows stay symbolic)
    assert re.fullmatch(r"float32\[s\d+,64\]/s64,1@cpu float32\[64\]@cpu float32\[s\d+,32\]/s32,1@cpu", sig), sig
    assert len(emitted) == 1, emitted  # one artifact entry for the compile
    assert emitted[0][1] == sig
