"""The planted-fault suite: tiny modules, each with one fault planted in the compiler or the model.

Each fault names the category, op and source line replay must report; the line is the one marked
``# FAULT: <name>`` in this file, found by text, so editing the file cannot silently shift an answer.
Shared by ``tests/replay/test_fault_suite.py`` and ``benchmarks/bench_replay_vs_bisector.py``.

Planting rules learned the hard way (shared/research/torch-compile-internals.md, "Pitfalls"): a patched
decomposition goes into both ``decompositions`` and the cached ``fast_random_decomps()`` table, and the
FX graph cache is off while the compiler is patched (its key does not cover patched code), except in
the stale-artifact faults, which rely on exactly that.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the conventional alias
from torch import nn

from inferensics import kernels
from inferensics.kernels import Provider, Requirements

aten = torch.ops.aten
HERE = Path(__file__)


def fault_line(name: str) -> int:
    """Line number of the ``# FAULT: name`` marker in this file."""
    for number, text in enumerate(HERE.read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# FAULT: {name}"):
            return number
    raise LookupError(name)


# -- custom op wrong in eager (its own implementation) ---------------------------------------------
@torch.library.custom_op("replaytest::naive_softmax", mutates_args=())
def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax without subtracting the row max: overflows in fp32 where fp64 does not."""
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


@naive_softmax.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


# -- modules ---------------------------------------------------------------------------------------
class Mlp(nn.Module):
    """Linear → RMS scale → activations: the ops most faults below touch."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        g = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * h  # FAULT: rsqrt
        a = F.hardsigmoid(g)  # FAULT: hardsigmoid
        b = F.silu(h)  # FAULT: silu
        c = torch.cos(h)  # FAULT: cos
        return a * b + c


class Centre(nn.Module):
    """A reduction and the pointwise ops that consume it (fused into one kernel)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = x.sum(-1, keepdim=True)  # FAULT: sum
        d = (x - m) * 0.375  # FAULT: centre
        return torch.tanh(d) * 0.625 + x  # FAULT: tanh


class Spread(nn.Module):
    """One pointwise value read by two reductions and an epilogue: the scheduler fuses all three."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sin(x) * 0.375  # FAULT: spread
        s = y.sum(-1, keepdim=True)
        m = y.amax(-1, keepdim=True)
        return (y - s) * 0.625 + m  # FAULT: epilogue


class SoftmaxInModel(nn.Module):
    """Model code that computes softmax by hand, without the max subtraction."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x * 40.0)  # FAULT: exp
        return e / e.sum(-1, keepdim=True)


class CustomSoftmax(nn.Module):
    """Calls a custom op whose own implementation is wrong."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.replaytest.naive_softmax(x * 40.0)  # FAULT: custom_op
        out: torch.Tensor = y * 2.0
        return out


class Embed(nn.Module):
    """Token ids → embeddings → a projection."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(32, 8)
        self.proj = nn.Linear(8, 8)

    def forward(self, ids: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        e = self.emb(ids)  # FAULT: embedding
        out: torch.Tensor = self.proj(e) * scale  # FAULT: scale
        return out


class Normed(nn.Module):
    """A projection normalised through the kernel registry's ``rms_norm``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        n = kernels.rms_norm(h, self.weight, 1e-6)  # FAULT: rms_norm_call
        return n * torch.sigmoid(h)


class Gated(nn.Module):
    """A gated MLP half through the kernel registry's ``silu_mul``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = kernels.silu_mul(self.lin(x))  # FAULT: silu_mul_call
        return g * 0.5 + 1.0


# -- planted kernel providers -----------------------------------------------------------------------
def rms_norm_unbiased(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:  # FAULT: rms_norm_unbiased
    """A "vendor" RMSNorm that divides the sum of squares by ``n - 1`` (a variance formula's divisor)."""
    xf = x.float()
    ms = xf.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1)
    return (xf * torch.rsqrt(ms + eps)).type_as(x) * weight


def silu_mul_tiled(x: torch.Tensor) -> torch.Tensor:  # FAULT: silu_mul_tiled
    """A row-tiled SiLU·mul for Inductor to fuse around: tiles of 4 rows; the tail tile reads its halves
    swapped (right whenever the rows are a multiple of 4)."""
    d = x.shape[-1] // 2
    rows = x.reshape(-1, x.shape[-1])
    full = rows.shape[0] // 4 * 4
    head = F.silu(rows[:full, :d]) * rows[:full, d:]
    tail = F.silu(rows[full:, d:]) * rows[full:, :d]
    return torch.cat([head, tail]).reshape(*x.shape[:-1], d)


def rms_norm_reciprocal(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """A benign variant: divides by the square root instead of multiplying by ``rsqrt`` (other rounding)."""
    xf = x.float()
    return (xf / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


@contextlib.contextmanager
def planted_provider(
    op_name: str, provider: Provider, *, bucket: Callable[[kernels.SemanticOp], str] | None = None
) -> Iterator[None]:
    """Register ``provider`` for ``op_name`` ahead of every other provider (of one shape ``bucket`` when
    given: a promotion on evidence for that bucket only); unregister it and restore the bucket's list after."""
    op = kernels.registry().op(op_name)
    key = bucket(op) if bucket is not None else None
    had_bucket = key in op.bucket_priority if key is not None else False
    op.register(provider, enabled=False)
    try:
        if key is None:
            op.set_priority([provider.name, *op.priority])
        else:
            op.set_priority([provider.name, *op.priority_for(key)], key)
        yield
    finally:
        op.unregister(provider.name)
        if key is not None and not had_bucket:
            op.bucket_priority.pop(key, None)
            op.set_priority(op.priority)  # drops cached decisions


_FLOATS = frozenset({torch.float16, torch.bfloat16, torch.float32})


def _unbiased_rms() -> contextlib.AbstractContextManager[None]:
    req = Requirements(dtypes=_FLOATS, notes=("no float64",))
    return planted_provider("rms_norm", Provider("unbiased", "vendor", rms_norm_unbiased, req, "planted"))


def _tiled_silu_mul() -> contextlib.AbstractContextManager[None]:
    req = Requirements(compiled="compiled", notes=("inside compiled graphs only",))
    return planted_provider(
        "silu_mul",
        Provider("tiled", "vendor", silu_mul_tiled, req, "planted"),
        bucket=lambda op: op.bucket([torch.empty(7, 32)]),
    )


def _reciprocal_rms() -> contextlib.AbstractContextManager[None]:
    return planted_provider(
        "rms_norm", Provider("reciprocal", "vendor", rms_norm_reciprocal, Requirements(), "planted control")
    )


# -- fault plants -----------------------------------------------------------------------------------
@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextlib.contextmanager
def patched_lowering(op: Any, replacement: Callable[..., Any]) -> Iterator[None]:
    """Replace Inductor's lowering of ``op`` (``replacement`` gets the original as ``original=``)."""
    from torch._inductor import lowering

    original = lowering.lowerings[op]
    lowering.lowerings[op] = lambda *a, **k: replacement(*a, original=original, **k)
    try:
        yield
    finally:
        lowering.lowerings[op] = original


@contextlib.contextmanager
def patched_decomposition(op: Any, fn: Callable[..., Any]) -> Iterator[None]:
    """Put ``fn`` into Inductor's decomposition tables (both the live and the cached one)."""
    from torch._inductor import decomposition

    tables = [decomposition.decompositions, decomposition.fast_random_decomps()]
    saved = [t.get(op) for t in tables]
    for t in tables:
        t[op] = fn
    try:
        yield
    finally:
        for t, old in zip(tables, saved, strict=True):
            if old is None:
                t.pop(op, None)
            else:
                t[op] = old


def _sin_instead(*args: Any, original: Any) -> Any:
    from torch._inductor import lowering

    return lowering.lowerings[aten.sin.default](*args)


def _sqrt_instead(*args: Any, original: Any) -> Any:
    from torch._inductor import lowering

    return lowering.lowerings[aten.sqrt.default](*args)


def _hardsigmoid_div5(x: torch.Tensor) -> torch.Tensor:
    return (x + 3).clamp(0, 6) / 5


def _silu_off(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x * 1.01)


def _hardsigmoid_reordered(x: torch.Tensor) -> torch.Tensor:
    return (x / 6 + 0.5).clamp(0, 1)


class _GraphPass:
    """A custom graph pass with a stable uuid (the FX cache's CustomGraphPass protocol)."""

    def __init__(self, name: str, fn: Callable[[torch.fx.Graph], None]) -> None:
        self.name = name
        self.fn = fn
        self.__qualname__ = name

    def __call__(self, graph: torch.fx.Graph) -> None:
        self.fn(graph)

    def uuid(self) -> str:
        return self.name


def _swap_sub_args(graph: torch.fx.Graph) -> None:
    """A 'canonicalisation' that forgets subtraction does not commute."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target is aten.sub.Tensor and isinstance(node.args[1], torch.fx.Node):
            node.args = (node.args[1], node.args[0], *node.args[2:])


def _cube_squares(graph: torch.fx.Graph) -> None:
    """A strength reduction that rewrites x**2 with the wrong exponent."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target is aten.pow.Tensor_Scalar and node.args[1] == 2:
            node.args = (node.args[0], 3)


def _commute_adds(graph: torch.fx.Graph) -> None:
    """A benign reordering: a + b → b + a."""
    for node in graph.nodes:
        if (
            node.op == "call_function"
            and node.target is aten.add.Tensor
            and len(node.args) == 2
            and isinstance(node.args[1], torch.fx.Node)
        ):
            node.args = (node.args[1], node.args[0])


@contextlib.contextmanager
def custom_pass(slot: str, name: str, fn: Callable[[torch.fx.Graph], None]) -> Iterator[None]:
    """Install a graph pass into an Inductor config slot."""
    import torch._inductor.config as cfg

    with cfg.patch({slot: _GraphPass(name, fn)}):
        yield


@contextlib.contextmanager
def corrupt_fused_constant(old: str, new: str) -> Iterator[None]:
    """A codegen fault in fused kernels only: ``old`` becomes ``new`` in kernels the scheduler fused.

    Each op unfused generates correct code; once the scheduler fuses it, the constant is wrong. Planted in
    both code generators' ``define_kernel`` (C++ on CPU, Triton on GPU: ``TritonScheduling`` overrides the
    SIMD base class's, so the base class is never called).
    """
    from torch._inductor import scheduler
    from torch._inductor.codegen import cpp, triton

    fused: set[str] = set()
    saved_init = scheduler.Scheduler._init
    saved_fused = scheduler.FusedSchedulerNode.__init__
    saved_cpp = cpp.CppScheduling.define_kernel
    saved_triton = triton.TritonScheduling.define_kernel

    def sched_init(self: Any, *args: Any, **kwargs: Any) -> Any:
        fused.clear()
        return saved_init(self, *args, **kwargs)

    def fused_init(self: Any, sched: Any, snodes: Any, *args: Any, **kwargs: Any) -> None:
        fused.update(n.get_name() for n in snodes)
        saved_fused(self, sched, snodes, *args, **kwargs)

    def hit(nodes: Any) -> bool:
        return any(getattr(n, "get_name", None) is not None and n.get_name() in fused for n in nodes)

    def cpp_define(self: Any, src_code: str, nodes: Any, *args: Any, **kwargs: Any) -> Any:
        return saved_cpp(self, src_code.replace(old, new) if hit(nodes) else src_code, nodes, *args, **kwargs)  # type: ignore[no-untyped-call]

    def triton_define(self: Any, src_code: str, node_schedule: Any, *args: Any, **kwargs: Any) -> Any:
        src = src_code.replace(old, new) if hit(node_schedule) else src_code
        return saved_triton(self, src, node_schedule, *args, **kwargs)  # type: ignore[no-untyped-call]

    scheduler.Scheduler._init = sched_init  # type: ignore[method-assign]
    scheduler.FusedSchedulerNode.__init__ = fused_init  # type: ignore[method-assign,assignment]
    cpp.CppScheduling.define_kernel = cpp_define  # type: ignore[method-assign]
    triton.TritonScheduling.define_kernel = triton_define  # type: ignore[method-assign]
    try:
        yield
    finally:
        scheduler.Scheduler._init = saved_init  # type: ignore[method-assign]
        scheduler.FusedSchedulerNode.__init__ = saved_fused  # type: ignore[method-assign]
        cpp.CppScheduling.define_kernel = saved_cpp  # type: ignore[method-assign]
        triton.TritonScheduling.define_kernel = saved_triton  # type: ignore[method-assign]


def _sum_to_hint(x: Any, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, original: Any) -> Any:
    """Reduces only the first ``hint`` columns when the last size is symbolic (the size hint baked in)."""
    from torch._inductor import lowering
    from torch._inductor.virtualized import V

    size = x.get_size()[-1]
    if not isinstance(size, int) and not getattr(size, "is_number", False):
        sizevars = V.graph.sizevars
        hint = getattr(sizevars, "optimization_hint", None) or sizevars.size_hint  # type: ignore[attr-defined]  # 2.11
        hint = hint(size)
        x = lowering.lowerings[aten.slice.Tensor](x, -1, 0, hint)
    return original(x, axis, keepdims, dtype=dtype)


def _cos_wrong_when_dynamic(x: Any, *, original: Any) -> Any:
    """A dynamic-shape code path with a bug: sin where cos was meant, only for symbolic sizes."""
    from torch._inductor import lowering

    if any(not isinstance(s, int) and not getattr(s, "is_number", False) for s in x.get_size()):
        return lowering.lowerings[aten.sin.default](x)
    return original(x)


@contextlib.contextmanager
def stale_cache_entry(
    plant: Callable[[], contextlib.AbstractContextManager[None]], fault: PlantedFault
) -> Iterator[None]:
    """Compile once under ``plant`` with the FX graph cache on (it stores a faulty entry), then unpatch.

    The served compile that follows hits that entry: the cache key does not cover patched compiler code.
    """
    import torch._functorch.config as functorch_config
    import torch._inductor.config as cfg

    with tempfile.TemporaryDirectory() as cache:
        old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        try:
            with cfg.patch(fx_graph_cache=True), functorch_config.patch(enable_autograd_cache=True):
                torch._dynamo.reset()
                with plant():
                    compiled = torch.compile(fault.model, **fault.compile_kwargs)
                    with torch.no_grad():
                        compiled(*fault.inputs)  # type: ignore[no-untyped-call]
                torch._dynamo.reset()
                yield
        finally:
            if old is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = old
            torch._dynamo.reset()


# -- the suite --------------------------------------------------------------------------------------
@dataclass
class PlantedFault:
    """One planted fault and the answer replay must give."""

    name: str
    category: str
    op: str
    marker: str
    """``# FAULT:`` marker of the line that must be named (empty for controls)."""
    model: Any
    inputs: tuple[Any, ...]
    plant: Callable[[], contextlib.AbstractContextManager[None]] = _nothing
    warmup: list[tuple[Any, ...]] = field(default_factory=list)
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    cache: bool = False
    """The fault lives in the FX graph cache: compiled under ``plant``, investigated without it."""
    provider: str = ""
    """For ``kernel_provider`` faults: the provider replay must name."""
    provider_marker: str = ""
    """``# FAULT:`` marker of that provider's ``def`` line."""

    @property
    def line(self) -> int:
        """The expected source line (0 for controls)."""
        return fault_line(self.marker) if self.marker else 0

    @contextlib.contextmanager
    def planted(self) -> Iterator[None]:
        """The compiler (or cache) state in which the fault shows."""
        if self.cache:
            with stale_cache_entry(self.plant, self):
                yield
        else:
            with self.plant():
                yield


def _seeded(factory: Callable[[], Any]) -> Any:
    torch.manual_seed(0)
    return factory().eval()


def build_suite() -> list[PlantedFault]:
    """Every planted fault and control, with fresh seeded modules and inputs."""
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    wide = torch.randn(4, 8)
    ids = torch.tensor([[1, 5, 9], [2, 31, 7]])
    nan_scale = torch.ones(2, 3, 8)
    nan_scale[1, 2, 5] = float("nan")
    bad_ids = torch.tensor([[1, 5, 9], [2, 40, 7]])
    mlp = _seeded(Mlp)
    centre = Centre().eval()
    embed = _seeded(Embed)
    return [
        PlantedFault("model softmax overflows", "source_op", "aten.exp", "exp", SoftmaxInModel().eval(), (wide * 4,)),
        PlantedFault(
            "custom op overflows",
            "source_op",
            "replaytest::naive_softmax",
            "custom_op",
            CustomSoftmax().eval(),
            (wide * 4,),
        ),
        PlantedFault(
            "hardsigmoid decomposition /5",
            "decomposition",
            "aten.hardsigmoid",
            "hardsigmoid",
            mlp,
            (x,),
            lambda: patched_decomposition(aten.hardsigmoid.default, _hardsigmoid_div5),
        ),
        PlantedFault(
            "silu decomposition off by 1%",
            "decomposition",
            "aten.silu",
            "silu",
            mlp,
            (x,),
            lambda: patched_decomposition(aten.silu.default, _silu_off),
        ),
        PlantedFault(
            "cos lowered as sin",
            "lowering",
            "aten.cos",
            "cos",
            mlp,
            (x,),
            lambda: patched_lowering(aten.cos.default, _sin_instead),
        ),
        PlantedFault(
            "rsqrt lowered as sqrt",
            "lowering",
            "aten.rsqrt",
            "rsqrt",
            mlp,
            (x,),
            lambda: patched_lowering(aten.rsqrt.default, _sqrt_instead),
        ),
        PlantedFault(
            "post-grad pass swaps sub operands",
            "graph_pass",
            "aten.sub",
            "centre",
            centre,
            (wide,),
            lambda: custom_pass("post_grad_custom_pre_pass", "swap_sub_args", _swap_sub_args),
        ),
        PlantedFault(
            "joint pass cubes squares",
            "graph_pass",
            "aten.pow",
            "rsqrt",
            mlp,
            (x,),
            lambda: custom_pass("joint_custom_post_pass", "cube_squares", _cube_squares),
        ),
        PlantedFault(
            "fused kernel scale constant",
            "schedule",
            "aten.mul",
            "spread",
            Spread().eval(),
            (wide,),
            lambda: corrupt_fused_constant("0.375", "0.875"),
        ),
        PlantedFault(
            "fused kernel epilogue constant",
            "schedule",
            "aten.mul",
            "epilogue",
            Spread().eval(),
            (wide,),
            lambda: corrupt_fused_constant("0.625", "0.125"),
        ),
        PlantedFault(
            "sum reduces to the size hint",
            "shape_specialization",
            "aten.sum",
            "sum",
            centre,
            (torch.randn(4, 13),),
            lambda: patched_lowering(aten.sum.dim_IntList, _sum_to_hint),
            warmup=[(torch.randn(4, 8),)],
            compile_kwargs={"dynamic": True},
        ),
        PlantedFault(
            "cos wrong on the dynamic path",
            "shape_specialization",
            "aten.cos",
            "cos",
            mlp,
            (torch.randn(7, 16),),
            lambda: patched_lowering(aten.cos.default, _cos_wrong_when_dynamic),
            warmup=[(torch.randn(4, 16),)],
        ),
        PlantedFault(
            "stale entry from a patched lowering",
            "artifact_mismatch",
            "aten.cos",
            "cos",
            mlp,
            (x,),
            lambda: patched_lowering(aten.cos.default, _sin_instead),
            cache=True,
        ),
        PlantedFault(
            "stale entry from a patched rsqrt lowering",
            "artifact_mismatch",
            "aten.rsqrt",
            "rsqrt",
            mlp,
            (x,),
            lambda: patched_lowering(aten.rsqrt.default, _sqrt_instead),
            cache=True,
        ),
        PlantedFault(
            "rms_norm provider divides by n-1 and wins priority",
            "kernel_provider",
            "inferensics::rms_norm",
            "rms_norm_call",
            _seeded(Normed),
            (x,),
            _unbiased_rms,
            provider="unbiased",
            provider_marker="rms_norm_unbiased",
        ),
        PlantedFault(
            "silu_mul provider wrong in one shape bucket (compiled only)",
            "kernel_provider",
            "inferensics::silu_mul",
            "silu_mul_call",
            _seeded(Gated),
            (torch.randn(7, 16),),
            _tiled_silu_mul,
            provider="tiled",
            provider_marker="silu_mul_tiled",
        ),
        PlantedFault(
            "stale entry from a fused-kernel constant",
            "artifact_mismatch",
            "aten.mul",
            "epilogue",
            Spread().eval(),
            (wide,),
            lambda: corrupt_fused_constant("0.625", "0.125"),
            cache=True,
        ),
        PlantedFault("NaN in an input", "inputs", "", "scale", embed, (ids, nan_scale)),
        PlantedFault(
            "token id out of range", "inputs", "aten.embedding", "embedding", embed, (bad_ids, torch.ones(2, 3, 8))
        ),
        PlantedFault(
            "control: commuted adds",
            "none",
            "",
            "",
            mlp,
            (x,),
            lambda: custom_pass("post_grad_custom_post_pass", "commute_adds", _commute_adds),
        ),
        PlantedFault(
            "control: reordered hardsigmoid decomposition",
            "none",
            "",
            "",
            mlp,
            (x,),
            lambda: patched_decomposition(aten.hardsigmoid.default, _hardsigmoid_reordered),
        ),
        PlantedFault(
            "control: rms_norm provider with other rounding",
            "none",
            "",
            "",
            _seeded(Normed),
            (x,),
            _reciprocal_rms,
        ),
        PlantedFault(
            "control: bf16 model (compiled keeps fp32 intermediates)",
            "none",
            "",
            "",
            _seeded(Mlp).to(torch.bfloat16),
            (x.to(torch.bfloat16),),
        ),
    ]


def on_device(fault: PlantedFault, device: str) -> PlantedFault:
    """The fault with its model, inputs and warm-up moved to ``device`` (``cuda``: Triton kernels)."""
    import dataclasses

    from inferensics.replay._internal.ladder import to_device

    return dataclasses.replace(
        fault,
        model=fault.model.to(device),
        inputs=to_device(fault.inputs, device),
        warmup=[to_device(w, device) for w in fault.warmup],
    )


def expected_input(fault: PlantedFault) -> str:
    """The input tensor an ``inputs`` verdict must name."""
    return {"NaN in an input": "scale", "token id out of range": "ids"}.get(fault.name, "")


def suite_names() -> list[str]:
    """The names of the suite's faults, in order (for test ids)."""
    return [f.name for f in build_suite()]


__all__ = ["F", "PlantedFault", "build_suite", "expected_input", "fault_line", "on_device", "suite_names"]
