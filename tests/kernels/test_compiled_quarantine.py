"""A provider whose real kernel raises never reaches a compiled graph: before a compile commits to it for a
signature, it runs once on real tensors made like the traced ones; if that raises it is quarantined and
counted as in eager, and the graph gets the next provider. Real ``torch.compile`` (Inductor) on the CPU."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest
import torch
import torch._functorch.config
import torch._inductor.config
from torch._subclasses.fake_tensor import FakeTensorMode

from inferensics import kernels
from inferensics.kernels import DecisionLog, Provider, Requirements, SemanticOp, ToleranceSpec, _torch_adapter, probe
from inferensics.kernels.ops.attention import probe_contents
from inferensics.kernels.ops.common import rows_bucket
from inferensics.kernels.samples import make_args

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

_names = (f"test_probe_op_{i}" for i in itertools.count())
PLANTED = "illegal memory access (planted)"


@pytest.fixture(autouse=True)
def _no_compile_caches() -> Iterator[None]:
    # Operator and provider names repeat from one test process to the next with other kernels behind them (each
    # test plants its own): a warm cache would hand back another run's graph under the same names.
    with torch._functorch.config.patch(enable_autograd_cache=False), torch._inductor.config.patch(fx_graph_cache=False):
        yield


def _kernel(fails_for: Callable[[torch.Tensor], bool], calls: list[tuple[int, ...]]) -> Callable[..., torch.Tensor]:
    """A custom operator (as a vendor library or a ``triton_op`` is) whose fake path always works and whose real
    kernel raises for the inputs ``fails_for`` picks; ``calls`` records the shape of each real call."""

    @torch.library.custom_op(f"inferensics_test::{next(_names)}_kernel", mutates_args=())
    def kernel(x: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(x.shape))
        if fails_for(x):
            raise RuntimeError(PLANTED)
        return x * 2

    @kernel.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    return kernel


def _op(kernel: Callable[..., torch.Tensor], reference: Callable[..., torch.Tensor] | None = None) -> SemanticOp:
    op = SemanticOp(
        next(_names),
        "(Tensor x) -> Tensor",
        reference or (lambda x: x * 2),
        tolerance=ToleranceSpec(),
        bucket=rows_bucket,
        doc="doubles x",
        log=DecisionLog(),
    )
    op.register(Provider("kernel", "triton", kernel, Requirements()))
    return op


def _compiled(op: SemanticOp, *, dynamic: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    def serve(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = op(x) + 1
        return out

    return torch.compile(serve, backend="inductor", dynamic=dynamic)


def test_a_kernel_that_raises_for_real_is_quarantined_at_compile_and_the_graph_gets_the_next_provider() -> None:
    calls: list[tuple[int, ...]] = []
    op = _op(_kernel(lambda x: x.shape[0] == 3, calls))
    # Before: the graph held the kernel and this call raised RuntimeError (planted), uncounted, unquarantined.
    out = _compiled(op)(torch.ones(3))
    torch.testing.assert_close(out, torch.full((3,), 3.0))
    reason = f"raised RuntimeError: {PLANTED}"
    assert op.quarantined == {("float32[3]@cpu", "kernel"): reason}
    assert op.log.stats()["failures"] == {f"{op.name}/kernel": 1}
    assert op.log.stats()["fallbacks"] == {op.name: 1}
    (d,) = op.log.snapshot()
    assert (d.provider, d.compiled, d.fallback, d.skipped) == ("reference", True, True, (("kernel", reason),))
    assert calls == [(3,)]  # the one probe
    # Quarantined for the signature: neither another compile nor an eager call tries it again.
    torch.testing.assert_close(_compiled(op)(torch.ones(3)), torch.full((3,), 3.0))
    torch.testing.assert_close(op(torch.ones(3)), torch.full((3,), 2.0))
    assert calls == [(3,)]
    assert op.log.stats()["failures"] == {f"{op.name}/kernel": 1}


def test_a_kernel_that_works_is_probed_once_per_signature_and_serves_the_graph() -> None:
    calls: list[tuple[int, ...]] = []
    op = _op(_kernel(lambda x: False, calls))
    serve = _compiled(op)
    for _ in range(3):
        torch.testing.assert_close(serve(torch.ones(4)), torch.full((4,), 3.0))
    assert calls == [(4,)] * 4  # one probe at compile, then the graph's three calls
    torch.testing.assert_close(_compiled(op)(torch.ones(4)), torch.full((4,), 3.0))  # another compile, same signature
    assert calls == [(4,)] * 5  # no second probe
    op(torch.ones(5))  # run for real in eager: a compile of that signature needs no probe
    _compiled(op)(torch.ones(5))
    assert calls == [(4,)] * 5 + [(5,)] * 2
    assert [(d.provider, d.signature) for d in op.log.snapshot() if d.compiled] == [
        ("kernel", "float32[4]@cpu"),
        ("kernel", "float32[5]@cpu"),
    ]
    assert op.quarantined == {}
    assert op.log.stats()["failures"] == {}


def test_dynamic_shapes_probe_at_the_sizes_the_compile_traced() -> None:
    calls: list[tuple[int, ...]] = []
    op = _op(_kernel(lambda x: True, calls))
    serve = _compiled(op, dynamic=True)
    torch.testing.assert_close(serve(torch.ones(6)), torch.full((6,), 3.0))
    torch.testing.assert_close(serve(torch.ones(7)), torch.full((7,), 3.0))
    assert calls == [(6,)]
    ((sig, provider),) = op.quarantined
    assert provider == "kernel"
    assert "[6]" not in sig  # the symbolic signature the graph serves, not the size it was probed at


def test_arguments_the_reference_rejects_are_still_the_callers_error_under_compile() -> None:
    def reference(x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] % 2:
            raise ValueError(f"needs an even last dimension, got shape {tuple(x.shape)}")
        return x * 2

    calls: list[tuple[int, ...]] = []
    op = _op(_kernel(lambda x: x.shape[-1] % 2 == 1, calls), reference)
    with pytest.raises(Exception, match="needs an even last dimension"):
        _compiled(op)(torch.ones(3))
    with pytest.raises(Exception, match="even last dimension"):
        torch.compile(lambda x: kernels.silu_mul(x) + 1, backend="inductor")(torch.ones(2, 3))


def test_a_probe_that_cannot_be_made_keeps_the_provider_without_blaming_it() -> None:
    calls: list[tuple[int, ...]] = []
    op = _op(_kernel(lambda x: False, calls))

    def no_contents(args: object) -> None:
        raise RuntimeError("cannot fill")

    op.contents = no_contents
    with FakeTensorMode() as mode:
        op(mode.from_tensor(torch.ones(2, 4)))
    assert calls == []
    assert op.quarantined == {}
    assert op.proven == set()
    assert op.log.snapshot()[0].provider == "kernel"
    assert op.log.stats()["unproven"] == {f"{op.name}/kernel": 1}  # kept untested, and counted


def test_a_paged_attention_probe_has_every_page_inside_the_cache() -> None:
    args = make_args(
        "paged_decode_attention",
        {"batch": 3, "context": 70, "q_heads": 4, "kv_heads": 2, "head_dim": 64, "page": 16},
        torch.float32,
        torch.device("cpu"),
    )
    q, k, v, table, lens, scale = args
    small_cache = k[:4]  # fewer pages than the table has entries: random numbers would run past the cache
    tensors = (q, small_cache, v[:4], table, lens)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) for a in tensors]
        with _torch_adapter.outside_tracing():
            real = probe.real_args([*fake, scale], probe_contents)
    rq, rk, _, rtable, rlens, rscale = real
    assert not any(isinstance(a, torch._subclasses.FakeTensor) for a in real)
    assert (rq.shape, rq.stride(), rq.dtype, rk.shape, rtable.dtype, rscale) == (
        q.shape,
        q.stride(),
        q.dtype,
        small_cache.shape,
        table.dtype,
        scale,
    )
    assert int(rtable.min()) >= 0
    assert int(rtable.max()) < rk.shape[0]
    assert rlens.tolist() == [table.shape[1] * k.shape[1]] * 3
    assert torch.isfinite(rq).all()
    assert kernels.registry().op("paged_decode_attention").contents is probe_contents
    # The op's own providers take the probe's arguments.
    torch.testing.assert_close(
        kernels.registry().op("paged_decode_attention").providers["sdpa"].fn(*real),
        kernels.registry().op("paged_decode_attention").reference(*real),
        rtol=1e-4,
        atol=1e-4,
    )


def test_a_probe_keeps_strides_offsets_and_expanded_layouts() -> None:
    tensors = (torch.randn(6, 8)[1:, ::2], torch.randn(1, 8).expand(5, 8), torch.zeros(3, dtype=torch.int64))
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(t) for t in tensors]
        with _torch_adapter.outside_tracing():
            real = probe.real_args(fakes)
    for r, t in zip(real, tensors, strict=True):
        assert (r.shape, r.stride(), r.storage_offset(), r.dtype) == (t.shape, t.stride(), t.storage_offset(), t.dtype)
    assert real[2].tolist() == [0, 0, 0]
    assert torch.isfinite(real[0]).all()
