"""Every touch of PyTorch's private modules by the kernel registry, in one place.

The registry needs what PyTorch keeps private: whether a call is being traced by a compiler (its arguments
are fake tensors), the id of the compile in progress, the structured trace log, where a compiled graph's
provider decisions are written as an artifact beside Inductor's own (the host SDK's trace sink and the
trace-log importer read it from there), and, to prove a provider on real tensors before a compile commits to
it, the sizes a trace's symbols stand for and a way to step outside the trace. Each is guarded: a torch
without the API reads as "not compiling", "no log" or "cannot prove", never an error in the serving path.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from inferensics.schema.events import KERNEL_DECISIONS_ARTIFACT as DECISIONS_ARTIFACT


def tracing(args: Iterable[Any]) -> bool:
    """Whether any tensor in ``args`` is a fake tensor (Dynamo or AOTAutograd tracing a graph)."""
    try:
        from torch._guards import detect_fake_mode

        return detect_fake_mode(tuple(a for a in args if isinstance(a, torch.Tensor))) is not None
    except Exception:
        return False


def fixed(size: Any) -> bool:
    """Whether ``size`` is a number: an ``int``, or a symbolic size a guard has fixed (its expression a constant)."""
    if isinstance(size, int):
        return True
    try:
        from torch.fx.experimental.symbolic_shapes import is_concrete_int

        return bool(is_concrete_int(size))
    except Exception:
        return False


def compile_id() -> str:
    """The compile in progress as Dynamo prints it (``0/1``); empty outside a compile."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
        return "" if cid is None else str(cid)
    except Exception:
        return ""


def current_compile() -> Any:
    """The compile in progress on this thread as its structured trace records name it (Dynamo's trace id: the
    compile id and attempt), or ``None`` outside one. Opaque: it is handed back to :func:`emit_decisions`."""
    try:
        from torch._guards import CompileContext

        return CompileContext.current_trace_id()
    except Exception:
        return None


def emit_decisions(payload: Callable[[], list[dict[str, Any]]], compile: Any = None) -> None:
    """Write provider decisions into the structured trace of ``compile`` (a :func:`current_compile` of the compile
    that made them), else of the compile in progress (lazily: the payload is built only when a trace handler
    listens).

    Decisions are written when the outermost compile ends (Dynamo runs its end callbacks for that one only), so a
    compile run inside another (a backend that compiles a helper) has ended by then; its records are written under
    its own compile id, as its other records are, not under the compile that happens to be current."""
    try:
        from torch._guards import CompileContext, compile_context
        from torch._logging import trace_structured  # type: ignore[attr-defined]

        scope: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        if compile is not None and compile != CompileContext.current_trace_id():
            context = CompileContext(compile.compile_id)
            context.attempt = compile.attempt
            scope = compile_context(context)
        with scope:
            trace_structured(
                "artifact",
                metadata_fn=lambda: {"name": DECISIONS_ARTIFACT, "encoding": "json"},
                payload_fn=lambda: json.dumps(payload(), sort_keys=True),
            )
    except Exception:
        return


def compile_reference(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` compiled by Inductor alone (the op left to the compiler), one graph per shape."""
    return torch.compile(fn, fullgraph=True, dynamic=False)


def hint(value: Any) -> Any:
    """A symbolic size or scalar of the compile in progress as the number it stands for now (its hint, read
    without adding a guard); ``None`` when it has none (a data-dependent size). Other values as they are."""
    if not isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return value
    try:
        from torch.fx.experimental import symbolic_shapes

        read = getattr(symbolic_shapes, "optimization_hint", None) or getattr(symbolic_shapes, "hint_int", None)
        if isinstance(value, torch.SymInt) and read is not None:
            with warnings.catch_warnings():  # torch 2.11's hint_int warns that it read size_hint
                warnings.simplefilter("ignore", FutureWarning)
                return int(read(value))
        node = value.node
        known = getattr(node, "_hint", None)
        return known if known is not None else getattr(node, "hint", None)
    except Exception:
        return None


def plain_eager() -> bool:
    """Whether no torch-function mode, no dispatch mode and no profiler is active: then a call that skips the
    dispatcher is seen by nothing that would have seen it inside (a mode, a trace, a profiler's op record)."""
    try:
        return not (
            torch._C._is_torch_function_mode_enabled()
            or torch._C._len_torch_dispatch_stack()
            or torch.autograd.profiler._is_profiler_enabled
        )
    except Exception:
        return False


def direct_call(args: Iterable[Any]) -> bool:
    """Whether a ``torch.library`` op called on ``args`` may run its Python body without the op: plain eager
    (:func:`plain_eager`), no compile tracing, and no tensor argument autograd would track (the op's autograd
    wrapper says what a backward through it does)."""
    if torch.compiler.is_compiling() or not plain_eager():
        return False
    return untracked(args)


def untracked(args: Iterable[Any]) -> bool:
    """Whether autograd tracks none of ``args``: grad mode is off, or no tensor argument requires grad (what
    :func:`direct_call` asks last, for a caller that has just found the call plain eager and not compiling)."""
    return not torch.is_grad_enabled() or not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def run_unwrapped(body: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``body(*args)`` with ``wrap_triton`` giving back the kernels themselves, as a ``triton_op``'s own eager call
    runs its body (launched through ``wrap_triton`` outside one, a kernel goes through the higher-order op's
    dispatch, which costs more than the op). Where this torch keeps the switch elsewhere, the body runs as is."""
    state = _WRAP_TRITON_STATE
    if state is None:
        return body(*args)
    prev = getattr(state, "value", True)
    state.value = False
    try:
        return body(*args)
    finally:
        state.value = prev


def _wrap_triton_state() -> Any:
    try:
        from torch._library import triton as library_triton

        state = library_triton.wrap_triton_enabled
        return state if callable(getattr(library_triton, "is_wrap_triton_enabled", None)) else None
    except Exception:
        return None


_WRAP_TRITON_STATE = _wrap_triton_state()
"""The thread-local switch ``wrap_triton`` reads (``torch._library.triton``), ``None`` where this torch has none."""


def symbolic(value: Any) -> bool:
    """Whether a size is a symbol of the compile in progress (a dynamic dimension), not a fixed number (plain
    ``isinstance``, so Dynamo can trace the question without specialising the size)."""
    return isinstance(value, torch.SymInt)


@contextlib.contextmanager
def outside_tracing() -> Iterator[None]:
    """Run real tensor code in the middle of a trace: the fake, proxy and functionalization modes of the
    compile in progress are set aside (so nothing created here is fake or recorded into the graph), and
    restored after."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.utils._python_dispatch import _disable_current_modes

    with unset_fake_temporarily(), _disable_current_modes(), torch.no_grad():
        yield


def cache_key_tag() -> str:
    """The tag every compile cache key includes (``torch.compiler.config.cache_key_tag``); empty without one."""
    try:
        return str(torch.compiler.config.cache_key_tag or "")
    except Exception:
        return ""


def set_cache_key_tag(tag: str) -> None:
    """Set the tag the compile caches' keys include (no effect on a torch without it)."""
    with contextlib.suppress(Exception):
        torch.compiler.config.cache_key_tag = tag


def compile_end_pending() -> bool:
    """Whether Dynamo is inside a compile whose end-of-compile callbacks are still to run (``False`` when this
    torch cannot say: then nothing may wait for them)."""
    try:
        from torch._dynamo.callback import callback_handler

        return int(callback_handler._CompilationCallbackHandler__pending_callbacks_counter) > 0  # type: ignore[attr-defined]
    except Exception:
        return False


def on_compile_start_and_end(hook: Callable[[Any], None]) -> bool:
    """Have Dynamo call ``hook`` (with its callback arguments) when a compile starts and when it ends, once
    each however often this is asked (``torch._dynamo.reset()`` forgets it: ask again); whether it will."""
    try:
        from torch._dynamo.callback import callback_handler

        if hook not in callback_handler.start_callbacks:
            callback_handler.register_start_callback(hook)
        if hook not in callback_handler.end_callbacks:
            callback_handler.register_end_callback(hook)
        return True
    except Exception:
        return False


def current_trace() -> Any:
    """The compile in progress on this thread (Dynamo's tracing context, shared by its AOTAutograd trace and the
    cache lookups), or ``None`` outside one (cheap: the registry's eager hot path asks on every call)."""
    try:
        return _TRACING.try_get()
    except Exception:
        return None


def _tracing_context() -> Any:
    try:
        from torch._guards import TracingContext

        return TracingContext
    except ImportError:
        return None


_TRACING: Any = _tracing_context()


# --- eager launch plans (kernels/_triton/launches.py) ----------------------------------------------------


def current_cuda_device() -> int:
    """The calling thread's current CUDA device index (where Triton launches), without ``torch.cuda``'s Python."""
    return int(torch._C._cuda_getDevice())


def raw_stream(device: int) -> int:
    """The raw handle of the calling thread's current stream on CUDA ``device`` (as Inductor's code reads it)."""
    return int(torch._C._cuda_getCurrentRawStream(device))


def stream_capturing() -> bool:
    """Whether the current CUDA stream is capturing a CUDA graph (then nothing may synchronise)."""
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    except Exception:
        return True  # cannot tell: treat as capturing, so nothing synchronises


_SCALAR_TYPES = {
    "i1": "i", "i8": "b", "i16": "h", "i32": "i", "i64": "l", "u1": "I", "u8": "B", "u16": "H", "u32": "I",
    "u64": "K", "fp16": "f", "bf16": "f", "fp32": "f", "f32": "f", "fp64": "d",
}  # fmt: skip
"""Triton's scalar parameter types as the static launcher's argument codes (Inductor's table)."""


class StaticKernel:
    """A compiled Triton kernel loaded for Inductor's static CUDA launcher: one C++ call a launch.

    ``params`` are the indices (in the kernel's parameter list) of the values a launch passes, in order: every
    parameter that is neither a ``constexpr`` nor a value Triton compiled in (an integer equal to 1, say); newer
    Triton adds ``scratch`` pointer parameters after them, which a launch passes as ``None``.
    """

    __slots__ = ("_arg_tys", "_function", "_module", "_shared", "_warps", "params", "scratch")

    def __init__(self, compiled: Any, device: int) -> None:
        import os
        import tempfile

        from torch._C import _StaticCudaLauncher

        meta = compiled.metadata
        if getattr(meta, "num_ctas", 1) != 1:
            raise NotImplementedError("more than one CTA a program")
        for option in ("launch_pdl", "launch_cooperative_grid"):
            if getattr(meta, option, False):
                raise NotImplementedError(f"the kernel is launched with {option}")
        scratch: list[None] = []
        for name in ("global_scratch_size", "profile_scratch_size"):
            if hasattr(meta, name):
                if getattr(meta, name) > 0:
                    raise NotImplementedError(f"the kernel needs {name}")
                scratch.append(None)  # newer Triton: a scratch pointer parameter the kernel never reads
        src = compiled.src
        names = list(src.fn.arg_names)

        def index(key: Any) -> int:
            return names.index(key) if isinstance(key, str) else int(key[0] if isinstance(key, tuple) else key)

        constants = {index(k) for k in getattr(src, "constants", {})}
        signature = {index(k): v for k, v in src.signature.items()}
        params, codes = [], []
        for i in sorted(signature):
            ty = signature[i]
            if ty == "constexpr" or i in constants:
                continue
            params.append(i)
            codes.append("O" if ty.startswith("*") else _SCALAR_TYPES[ty])
        self.params = tuple(params)
        self._arg_tys = "".join(codes) + "O" * len(scratch)
        self.scratch = len(scratch)
        with tempfile.TemporaryDirectory(prefix="inferensics-kernel-") as folder:
            path = os.path.join(folder, "kernel.cubin")
            with open(path, "wb") as fh:
                fh.write(compiled.asm["cubin"])
            loaded = _StaticCudaLauncher._load_kernel(path, meta.name, meta.shared, device)
        # (function, n_regs, n_spills) up to torch 2.12; (module, function, n_regs, n_spills) since
        self._module, self._function = (None, loaded[0]) if len(loaded) == 3 else (loaded[0], loaded[1])
        self._warps, self._shared = int(meta.num_warps), int(meta.shared)

    def launch(self, grid: tuple[int, int, int], stream: int, values: tuple[Any, ...]) -> None:
        """Launch on ``stream`` of the current device: ``values`` for :attr:`params` (pointers as integers), then
        :attr:`scratch` ``None``."""
        gx, gy, gz = grid
        _STATIC_LAUNCH(self._function, gx, gy, gz, self._warps, self._shared, self._arg_tys, values, stream)


def _static_launch() -> Any:
    try:
        from torch._C import _StaticCudaLauncher

        return _StaticCudaLauncher._launch_kernel
    except Exception:
        return None


_STATIC_LAUNCH: Any = _static_launch()


@contextlib.contextmanager
def aten_ops_seen(seen: list[tuple[Any, tuple[Any, ...], Any]]) -> Iterator[None]:
    """Append ``(aten op, arguments, result)`` to ``seen`` for every op the block runs on this thread (a dispatch
    mode: a factory function's tensor reaches the caller through a ``detach`` of the one seen here)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Seen(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's class is untyped
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            seen.append((func, tuple(args), out))
            return out

    with _Seen():  # type: ignore[no-untyped-call]
        yield


def allocating_ops() -> frozenset[Any]:
    """The aten ops that only allocate (``torch.empty`` and ``empty_strided``)."""
    aten = torch.ops.aten
    return frozenset({aten.empty.memory_format, aten.empty_strided.default})


def view_ops() -> frozenset[Any]:
    """The aten ops that only view a tensor's memory (no kernel, no copy)."""
    aten = torch.ops.aten
    return frozenset({
        aten.view.default, aten._unsafe_view.default, aten.slice.Tensor, aten.select.int, aten.as_strided.default,
        aten.alias.default, aten.detach.default, aten.t.default, aten.transpose.int, aten.permute.default,
        aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default, aten.squeeze.dims, aten.expand.default,
    })  # fmt: skip
