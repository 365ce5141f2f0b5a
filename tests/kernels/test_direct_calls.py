"""A Triton provider's eager call runs its op's Python body directly, launching its kernel as the op's own eager
call would; anything that watches or traces the call (a dispatch mode, the profiler, autograd, a compile) still
goes through the ``torch.library`` op, so what it sees is unchanged.

Runs on a GPU when there is one, else in Triton's interpreter (this part's conftest).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from inferensics.kernels import DecisionLog, Provider, Requirements, SemanticOp, ToleranceSpec, _torch_adapter
from inferensics.kernels.ops.common import rows_bucket, triton_fn


class _Counted:
    """A Triton module's op and its ``DIRECT`` body replaced by counting wrappers of themselves."""

    def __init__(self, mp: pytest.MonkeyPatch, module: str, name: str) -> None:
        loaded = importlib.import_module(f"inferensics.kernels._triton.{module}")
        self.calls = {"op": 0, "body": 0}
        op, body = getattr(loaded, name), loaded.DIRECT[name]
        mp.setattr(loaded, name, self._counting("op", op))
        mp.setitem(loaded.DIRECT, name, self._counting("body", body))
        self.fn = triton_fn(module, name)  # a fresh provider function: resolves the wrappers on its first call

    def _counting(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            self.calls[key] += 1
            return fn(*args)

        return counted


@pytest.fixture
def rms(device: torch.device) -> Iterator[tuple[_Counted, tuple[Any, ...]]]:
    with pytest.MonkeyPatch.context() as mp:
        counted = _Counted(mp, "norm", "rms_norm_triton")
        x = torch.randn(5, 64, device=device)
        w = torch.randn(64, device=device)
        yield counted, (x, w, 1e-6)


def test_a_plain_eager_call_runs_the_body_and_gives_the_ops_bits(rms: tuple[_Counted, tuple[Any, ...]]) -> None:
    counted, args = rms
    direct = counted.fn(*args)
    assert counted.calls == {"op": 0, "body": 1}
    through_op = counted.fn.entry()(*args)  # type: ignore[attr-defined]  # the benchmark's peer: always the op
    assert counted.calls == {"op": 1, "body": 1}
    assert torch.equal(direct, through_op)
    assert torch.allclose(direct, torch.nn.functional.rms_norm(args[0], (64,), args[1], 1e-6), atol=1e-5)


class _Seen(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's class is untyped
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_a_dispatch_mode_sees_the_op(rms: tuple[_Counted, tuple[Any, ...]]) -> None:
    counted, args = rms
    with _Seen() as seen:
        counted.fn(*args)
    assert counted.calls["op"] == 1
    assert any("rms_norm_triton" in op for op in seen.ops), seen.ops


def test_the_profiler_records_the_op(rms: tuple[_Counted, tuple[Any, ...]]) -> None:
    counted, args = rms
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        counted.fn(*args)
    assert counted.calls["op"] == 1
    assert any("rms_norm_triton" in e.name for e in prof.events())


def test_inputs_autograd_tracks_go_through_the_op(rms: tuple[_Counted, tuple[Any, ...]]) -> None:
    counted, (x, w, eps) = rms
    counted.fn(x, w.requires_grad_(), eps)
    assert counted.calls == {"op": 1, "body": 0}
    with torch.no_grad():
        counted.fn(x, w, eps)
    assert counted.calls == {"op": 1, "body": 1}


def test_nothing_is_called_directly_while_dynamo_traces() -> None:
    x = torch.ones(3)
    compiled = torch.compile(
        lambda a: a + (1 if _torch_adapter.direct_call((a,)) else 2), backend="aot_eager", fullgraph=True
    )
    assert torch.equal(compiled(x), x + 2)
    assert _torch_adapter.direct_call((x,))


def test_run_unwrapped_launches_kernels_directly_and_restores_the_switch() -> None:
    from torch._library.triton import is_wrap_triton_enabled

    seen: list[bool] = []
    _torch_adapter.run_unwrapped(lambda: seen.append(is_wrap_triton_enabled()), ())
    assert seen == [False]
    assert is_wrap_triton_enabled()

    def failing() -> None:
        raise ValueError("planted")

    with pytest.raises(ValueError, match="planted"):
        _torch_adapter.run_unwrapped(failing, ())
    assert is_wrap_triton_enabled()


def test_a_held_eager_call_asks_once_whether_anything_observes_it(
    rms: tuple[_Counted, tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SemanticOp.__call__`` serves a held signature only after finding the call plain eager and not compiling;
    its Triton provider then asked both again (``direct_call``, about 1 µs a call). Asked once now, with the same
    outcome: the body runs directly, and a tensor autograd tracks still goes through the op."""
    counted, (x, w, eps) = rms
    op = SemanticOp(
        "test_direct_rms_asked_once", "(Tensor x, Tensor w, float eps) -> Tensor",
        lambda x, w, eps: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps), tolerance=ToleranceSpec(),
        bucket=rows_bucket, doc="rms norm", log=DecisionLog(),
    )  # fmt: skip
    op.register(Provider("triton", "triton", counted.fn, Requirements()))
    first = op(x, w, eps)  # decided on the full path, then held
    asked: list[bool] = []
    plain_eager = _torch_adapter.plain_eager

    def counted_plain_eager() -> bool:
        asked.append(plain_eager())
        return asked[-1]

    monkeypatch.setattr(_torch_adapter, "plain_eager", counted_plain_eager)
    assert torch.equal(op(x, w, eps), first)
    assert asked == [True]
    assert counted.calls == {"op": 0, "body": 2}
    op(x, w.requires_grad_(), eps)  # the same key: held, but autograd must see the op
    assert counted.calls == {"op": 1, "body": 2}
    assert op.log.stats()["calls"] == {f"{op.name}/triton": 3}
