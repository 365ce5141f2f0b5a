"""The eager hot path: a signature that ran before reuses its decision without deciding again, and anything that
would change the decision (a priority change, a provider that raises, a quarantine from a compile's probe, other
strides, the interpreter switches) takes the full path again, so the hot path serves exactly what the full
path would."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch

from inferensics.kernels import DecisionLog, Provider, Requirements, SemanticOp, ToleranceSpec
from inferensics.kernels.op import eager_key
from inferensics.kernels.ops.common import rows_bucket
from inferensics.kernels.requirements import INTERPRETER_ENV

_names = (f"test_fast_op_{i}" for i in itertools.count())


def _op(*providers: tuple[str, Callable[[torch.Tensor], torch.Tensor], Requirements]) -> SemanticOp:
    op = SemanticOp(
        next(_names), "(Tensor x) -> Tensor", lambda x: x * 2, tolerance=ToleranceSpec(), bucket=rows_bucket,
        doc="doubles x", log=DecisionLog(),
    )  # fmt: skip
    for name, fn, needs in providers:
        op.register(Provider(name, "vendor", fn, needs))
    return op


def _calls(op: SemanticOp) -> dict[str, int]:
    return {k.split("/", 1)[1]: v for k, v in op.log.stats()["calls"].items()}


def test_repeated_calls_are_served_and_counted_and_a_priority_change_applies_at_once() -> None:
    op = _op(("plus", lambda x: x + x, Requirements()), ("times", lambda x: x * 2.0, Requirements()))
    x = torch.ones(4, 3)
    for _ in range(5):
        assert torch.equal(op(x), x * 2)
    assert _calls(op) == {"plus": 5}
    assert len(op.log.snapshot()) == 1  # one decision for the signature, not one per call
    op.set_priority(["times", "plus", "reference"])
    op(x)
    assert _calls(op) == {"plus": 5, "times": 1}


def test_a_provider_that_raises_after_serving_is_quarantined_and_the_call_still_served() -> None:
    seen: list[int] = []

    def flaky(x: torch.Tensor) -> torch.Tensor:
        seen.append(1)
        if len(seen) == 3:
            raise RuntimeError("illegal memory access (planted)")
        return x + x

    op = _op(("flaky", flaky, Requirements()))
    x = torch.ones(2, 2)
    outs = [op(x) for _ in range(5)]
    assert all(torch.equal(o, x * 2) for o in outs)
    assert len(seen) == 3  # taken out after it raised: the last two calls went to the reference
    assert op.log.stats()["failures"] == {f"{op.name}/flaky": 1}
    assert _calls(op) == {"flaky": 2, "reference": 3}
    assert op.status("flaky") == "quarantined"


def test_other_strides_or_dtypes_decide_again() -> None:
    contiguous_only = Requirements(checks=(lambda a: None if a[0].is_contiguous() else "needs contiguous",))
    op = _op(("dense", lambda x: x + x, contiguous_only))
    x = torch.ones(4, 4)
    op(x)
    op(x.t())  # the same shape, transposed: another key
    op(x.double())
    assert _calls(op) == {"dense": 2, "reference": 1}


def test_the_interpreter_switches_are_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.ones(2)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # both switches (a GPU host's suite leaves Triton's off)
    monkeypatch.setenv(INTERPRETER_ENV, "0")
    off = eager_key((x,))
    monkeypatch.setenv(INTERPRETER_ENV, "1")
    assert eager_key((x,)) != off
    op = _op(("interp", lambda x: x + x, Requirements(platforms=frozenset({"interpreter"}))))
    op(x)
    monkeypatch.setenv(INTERPRETER_ENV, "0")
    op(x)
    assert _calls(op) == {"interp": 1, "reference": 1}


def test_subclassed_or_traced_tensors_take_the_full_path() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.ones(2))
        assert eager_key((fake,)) is None
    assert eager_key((torch.ones(2), 1e-6)) is not None


def test_a_held_signature_skips_the_dispatcher_only_where_nothing_would_see_the_operator() -> None:
    # In plain eager the hot path calls the provider without the dispatcher's hop into Python; a torch-function
    # mode or a profiler sees torch.ops.inferensics.<op> as before, held signature or not, and every call counts.
    from torch.overrides import TorchFunctionMode

    op = _op(("plus", lambda x: x + x, Requirements()))
    x = torch.ones(3)
    op(x)  # decides and holds the signature
    seen: list[str] = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Record():
        assert torch.equal(op(x), x * 2)
    assert seen[0] == f"inferensics.{op.name}.default", seen
    with torch.profiler.profile() as prof:
        op(x)
    assert f"inferensics::{op.name}" in {e.key for e in prof.key_averages()}
    seen.clear()
    op(x)
    assert not seen
    assert _calls(op) == {"plus": 4}
