"""Our Triton providers under a compile with dynamic shapes: the row count is symbolic there.

Found on an H100 (torch 2.11): a bundle build that compiled the registry MLP at 8 and then 32 tokens traced
``rms_norm`` with a symbolic row count, and the measured table's lookup raised ``TypeError: unhashable type:
non-nested SymInt`` inside the compile. The row bucket only picks a tuning, so a symbolic count takes its hint's
bucket without a guard; the columns size the kernel's blocks, so a compile specialises on them.

In CI the tables' lookups run against a real ``ShapeEnv`` (the tables apply on sm_90 only, so ``is_sm90`` is
patched: no GPU here); the compiled path itself runs where there is a GPU (Triton's interpreter cannot run inside a
compiled graph).
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
        return {"tokens": size, "heads": 8, "head_dim": 128}
    if op == "paged_decode_attention":
        return {"batch": size, "context": 300, "q_heads": 8, "kv_heads": 2, "head_dim": 128, "page": 16}
    return {"tokens": size, "hidden": 1024}


def _served(op: str) -> Callable[..., Any]:
    """What a model does with the op: call it through the registry, then compute on."""
    semantic = kernels.registry().op(op)

    def serve(*args: Any) -> Any:
        out = semantic(*args)
        return tuple(o * 2 for o in out) if isinstance(out, tuple) else out * 2

    return serve


def _compiled_decisions(op: str, sizes: tuple[int, ...]) -> list[Any]:
    """Serve ``op`` compiled with ``dynamic=True`` at each size on CUDA (each output checked against the op run
    eagerly); the compiled decisions the registry recorded meanwhile."""
    device = torch.device("cuda")
    semantic = kernels.registry().op(op)
    before = len(semantic.log.snapshot())
    compiled = torch.compile(_served(op), backend="inductor", dynamic=True)
    for size in sizes:
        args = make_args(op, _shape(op, size), torch.bfloat16, device, seed=size)
        torch.testing.assert_close(compiled(*args), _served(op)(*args), atol=2e-2, rtol=2e-2)
    return [d for d in semantic.log.snapshot()[before:] if d.compiled]


@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU: Triton's interpreter cannot run inside a compiled graph")
@pytest.mark.parametrize("op", ["rms_norm", "fused_add_rms_norm", "silu_mul", "rotary_embedding"])
def test_one_dynamic_graph_serves_every_row_count_through_our_kernel(op: str) -> None:
    decisions = _compiled_decisions(op, (8, 32, 5))
    assert [(d.provider, d.fallback) for d in decisions] == [("triton", False)], decisions
    assert re.search(r"\[s\d+", decisions[0].signature), decisions[0].signature  # symbolic rows: one graph for all


@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU: Triton's interpreter cannot run inside a compiled graph")
def test_paged_attention_under_dynamic_shapes_specialises_on_its_plan_sizes() -> None:
    # The split plan follows from the batch and the table's width, so a graph never runs another size's plan:
    # each batch size is its own graph, every one served by our kernel and right.
    decisions = _compiled_decisions("paged_decode_attention", (2, 3, 2))
    assert decisions
    assert {(d.provider, d.fallback) for d in decisions} == {("triton", False)}, decisions
