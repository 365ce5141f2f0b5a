"""Faults in a user's own op or provider code are the user's to fix, but never the serving call's to suffer and never
a traceback: a ``bucket`` function that raises, a ``register(before=...)`` naming a provider not listed, an op name
taken or a schema torch cannot parse, ``Samples.make`` raising in qualification. Each test names what the code did
before."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from inferensics import kernels
from inferensics.kernels import DecisionLog, Provider, QualifyOptions, Registry, Requirements, SemanticOp, ToleranceSpec
from inferensics.kernels.op import UNBUCKETED
from inferensics.kernels.ops.common import rows_bucket

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

_names = (f"test_own_fault_op_{i}" for i in itertools.count())
QUICK: dict[str, Any] = {"trials": 2, "warmup": 0, "iters": 1, "accuracy_seeds": 1, "dtype": torch.float32}


def _rows_only(args: Sequence[Any]) -> str:
    """A user's bucket function that knows only 2-D inputs: a 1-D one raises IndexError."""
    x = args[0]
    return f"{x.dtype}/n{x.shape[1]}/t{x.shape[0]}"


def _op(bucket: Any = rows_bucket, samples: kernels.Samples | None = None) -> SemanticOp:
    # torch.library operators cannot be removed: every test defines its own op under a fresh name.
    return SemanticOp(
        next(_names),
        "(Tensor x) -> Tensor",
        lambda x: x * 2,
        tolerance=ToleranceSpec(),
        bucket=bucket,
        doc="doubles x (a test's op)",
        log=DecisionLog(),
        samples=samples,
    )


def test_a_bucket_function_that_raises_leaves_the_call_to_the_reference_counted() -> None:
    op = _op(_rows_only)
    op.register(Provider("mine", "vendor", lambda x: x + x, Requirements(platforms=frozenset({"cpu"}))))
    assert torch.equal(op(torch.ones(2, 3)), torch.full((2, 3), 2.0))  # 2-D: the bucket is named, mine serves
    # Before: the IndexError came out of the serving call.
    out = op(torch.ones(3))
    assert torch.equal(out, torch.full((3,), 2.0))
    d = next(d for d in op.log.snapshot() if d.signature == "float32[3]@cpu")
    assert (d.provider, d.bucket, d.fallback, d.compiled) == ("reference", UNBUCKETED, True, False)
    ((skipped, reason),) = d.skipped
    assert skipped == "mine"
    assert reason.startswith("the op's bucket function raised IndexError: "), reason
    assert op.log.stats()["failures"] == {f"{op.name}/{UNBUCKETED}": 1}
    op(torch.ones(3))  # decided once per signature: counted once
    assert op.log.stats()["failures"] == {f"{op.name}/{UNBUCKETED}": 1}
    assert op.log.stats()["calls"] == {f"{op.name}/mine": 1, f"{op.name}/reference": 2}


def test_a_bucket_function_that_raises_while_compiled_traces_the_reference_in() -> None:
    torch._dynamo.reset()
    op = _op(_rows_only)
    op.register(Provider("mine", "vendor", lambda x: x * 3, Requirements(platforms=frozenset({"cpu"}))))
    compiled = torch.compile(lambda x: op.overload(x) + 1, backend="aot_eager", dynamic=False)
    # Before: the IndexError came out of the compile, through the serving call.
    assert torch.equal(compiled(torch.ones(5)), torch.full((5,), 3.0))
    (d,) = op.log.snapshot()
    assert (d.provider, d.bucket, d.compiled, d.fallback) == ("reference", UNBUCKETED, True, True)


def test_registering_before_a_provider_not_listed_is_refused_and_changes_nothing() -> None:
    op = _op()
    mine = Provider("mine", "vendor", lambda x: x + x, Requirements())
    for before in ("triton", "unlisted"):  # triton: a host where Triton does not import has none
        # Before: "ValueError: 'triton' is not in list", with "mine" registered but listed nowhere, so registering it
        # again with a right `before` said it was registered already.
        with pytest.raises(ValueError, match=rf"cannot register 'mine' before '{before}', .*\(reference\)"):
            op.register(mine, before=before)
        assert "mine" not in op.providers
    op.register(Provider("unlisted", "vendor", lambda x: x + x, Requirements()), enabled=False)
    with pytest.raises(ValueError, match="not in the default priority list"):
        op.register(mine, before="unlisted")
    op.register(mine)
    assert op.priority == ["mine", "reference"]


def test_an_op_name_taken_or_a_schema_torch_cannot_parse_is_one_line() -> None:
    def make(name: str, schema: str) -> None:
        SemanticOp(name, schema, lambda x: x, tolerance=ToleranceSpec(), bucket=rows_bucket, doc="", log=DecisionLog())

    # Before: torch's RuntimeError, "Tried to register an operator (...) multiple times ... Duplicate registration:
    # registered at .../kernels/op.py:67 ..." over several lines.
    with pytest.raises(ValueError, match=r"^kernel op 'rms_norm' is already defined in this process") as taken:
        make("rms_norm", "(Tensor x) -> Tensor")
    assert "kernels.registry().op('rms_norm').register(" in str(taken.value)
    with pytest.raises(
        ValueError, match=r"schema '\(Tensor x -> Tensor' is not a torch.library schema \(expected \)"
    ) as malformed:
        make(next(_names), "(Tensor x -> Tensor")
    for error in (taken.value, malformed.value):
        assert len(str(error).splitlines()) == 1, error


@pytest.mark.parametrize("fault", ["make", "bucket"])
def test_own_code_raising_while_qualify_makes_arguments_is_a_rejected_shape_not_a_traceback(fault: str) -> None:
    def make(shape: dict[str, int], dtype: torch.dtype, device: torch.device, seed: int) -> tuple[Any, ...]:
        if fault == "make" and shape["rows"] == 3:
            return (torch.ones(shape["rows"]["count"]),)  # type: ignore[index]  # a user's slip: TypeError
        return (torch.ones(shape["rows"], 8, dtype=dtype, device=device),)

    def bucket(args: Sequence[Any]) -> str:
        if fault == "bucket" and args[0].shape[0] == 3:
            raise KeyError("no bucket for 3 rows")
        return rows_bucket(args)

    op = _op(bucket, kernels.Samples(("rows",), make))
    op.register(Provider("mine", "vendor", lambda x: x + x, Requirements(accuracy="exact")))
    reg = Registry([op], op.log)
    # Before: the TypeError (KeyError) came out of qualify, so the command printed a traceback.
    result = kernels.qualify(reg, QualifyOptions(shapes={op.name: [{"rows": 3}, {"rows": 4}]}, **QUICK))
    rejected = [r for r in result.records if r.shape == "rows=3"]
    assert {(r.provider, r.status) for r in rejected} == {("reference", "error"), ("mine", "error")}
    raised = "TypeError" if fault == "make" else "KeyError"
    detail = rejected[0].detail
    assert detail.startswith(f"the op's own code raised making its arguments or naming their bucket ({raised}: ")
    assert detail.endswith("nothing measured at this shape"), detail
    assert {(r.provider, r.status) for r in result.records if r.shape == "rows=4"} == {
        ("reference", "measured"),
        ("mine", "measured"),
    }
