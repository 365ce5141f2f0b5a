"""The one module that touches PyTorch's private compile APIs (ARCHITECTURE decision 8).

Every hook the SDK uses is probed once into a capability table. A missing hook never raises: the SDK
degrades (for example, without the guard hook a request's guard outcome is ``none``) and the table
records why, so the host can export it.

Known availability (checked 2026-11-30, see shared/research/torch-compile-internals.md):

==============================================  ============  ============
hook                                            torch 2.11    torch 2.13
==============================================  ============  ============
``torch.__trace`` logger (trace_structured)     yes           yes
``set_guard_complete_hook``                     yes           yes
``register_hook_for_recompile_user_context``    yes           yes
``CompileContext.current_compile_id``           yes           yes
``compile_fx(config_patches=...)``              yes           yes
``config.trace.provenance_tracking_level``      yes           yes
``torch.compile(recompile_limit=...)`` kwarg    no            yes
``torch._dynamo.config.suppress_errors``        yes           yes
``torch._C._StaticCudaLauncher`` (fingerprint)  yes (H200)    CUDA builds
``runtime.cache_dir_utils.cache_dir`` (sizes)   yes           yes
==============================================  ============  ============

The static launcher is not probed here: the fingerprint checks it on its probe tensor and keeps
Triton's own launch when it raises or disagrees.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import torch

TRACE_LOGGER: Final = "torch.__trace"
SUPPORTED: Final = ("2.11", "2.13")


@dataclass(frozen=True, slots=True)
class Capability:
    """Whether one hook is usable here, and why not when it is not."""

    name: str
    available: bool
    reason: str = ""


def _probe(name: str, check: Callable[[], object]) -> Capability:
    try:
        ok = bool(check())
    except Exception as exc:  # a probe must never fail the host
        return Capability(name, False, f"{type(exc).__name__}: {exc}")
    return Capability(name, ok, "" if ok else "not present in this torch build")


def _has_trace_logger() -> bool:
    from torch._logging import _internal

    return hasattr(_internal, "trace_structured")


def _has_guard_hook() -> bool:
    from torch._C._dynamo import eval_frame

    return hasattr(eval_frame, "set_guard_complete_hook")


def _has_user_context() -> bool:
    import torch._dynamo

    return hasattr(torch._dynamo, "register_hook_for_recompile_user_context")


def _has_compile_id() -> bool:
    from torch._guards import CompileContext

    return hasattr(CompileContext, "current_compile_id")


def _has_compile_fx() -> bool:
    import inspect

    from torch._inductor import compile_fx

    return "config_patches" in inspect.signature(compile_fx.compile_fx).parameters


def _has_provenance() -> bool:
    from torch._inductor import config

    return hasattr(config.trace, "provenance_tracking_level")


def probe_capabilities() -> dict[str, Capability]:
    """The capability table for the running torch (computed fresh; cheap)."""
    checks: dict[str, Callable[[], object]] = {
        "trace_logger": _has_trace_logger,
        "guard_complete_hook": _has_guard_hook,
        "recompile_user_context": _has_user_context,
        "current_compile_id": _has_compile_id,
        "compile_fx": _has_compile_fx,
        "provenance_tracking": _has_provenance,
    }
    table = {name: _probe(name, fn) for name, fn in checks.items()}
    version = ".".join(torch.__version__.split(".")[:2])
    if version not in SUPPORTED:
        table["torch_version"] = Capability("torch_version", False, f"torch {torch.__version__} is not in {SUPPORTED}")
    else:
        table["torch_version"] = Capability("torch_version", True)
    return table


# --- trace logger ------------------------------------------------------------------------------------


def add_trace_handler(handler: logging.Handler) -> None:
    """Attach ``handler`` to the structured-trace logger (every ``trace_structured`` record reaches it)."""
    logging.getLogger(TRACE_LOGGER).addHandler(handler)


def remove_trace_handler(handler: logging.Handler) -> None:
    """Detach ``handler`` from the structured-trace logger."""
    logging.getLogger(TRACE_LOGGER).removeHandler(handler)


# --- guard hook ----------------------------------------------------------------------------------------

GuardHook = Callable[[bool], bool]


def get_guard_hook() -> GuardHook | None:
    """The guard-complete hook installed now, if any (read by setting it back at once)."""
    from torch._C._dynamo import eval_frame

    current: GuardHook | None = eval_frame.set_guard_complete_hook(None)
    eval_frame.set_guard_complete_hook(current)  # type: ignore[arg-type]
    return current


def set_guard_hook(hook: GuardHook | None) -> GuardHook | None:
    """Install the global guard-complete hook; returns the previous one (one slot per process)."""
    from torch._C._dynamo import eval_frame

    previous: GuardHook | None = eval_frame.set_guard_complete_hook(hook)  # type: ignore[arg-type]
    return previous


# --- recompile user context ----------------------------------------------------------------------------


def register_recompile_context(fn: Callable[[], str]) -> Callable[[], None]:
    """Register ``fn`` as a recompile user-context hook; returns a function that unregisters it."""
    from torch._dynamo import utils as dynamo_utils

    dynamo_utils.register_hook_for_recompile_user_context(fn)

    def unregister() -> None:
        # The registry is a module-level list in torch._dynamo.utils with no public remove.
        with contextlib.suppress(Exception):
            hooks: list[Any] | None = getattr(dynamo_utils, "_recompile_user_contexts", None)
            if hooks is not None and fn in hooks:
                hooks.remove(fn)

    return unregister


def current_compile_id() -> str:
    """Dynamo's compile id of the compile in progress (``0/1``), or ``""``."""
    from torch._guards import CompileContext

    cid = CompileContext.current_compile_id()
    return str(cid) if cid is not None else ""


def compiling_backend(marker: str, max_depth: int = 64) -> tuple[Any, Any]:
    """The backend and the code object of the Dynamo compile running on this thread: ``(backend, code)``.

    Called from the trace sink when a compile starts (``dynamo_start``), inside Dynamo's ``_compile``. Dynamo
    wraps the backend given to ``torch.compile`` (``WrapBackendDebug`` → ``_TorchCompileWrapper`` → the
    backend); the first object along that chain carrying the attribute ``marker`` is returned. ``(None,
    code)`` when the compile was made with another backend, ``(None, None)`` when no compile frame is
    found (an export, an AOT compile, a torch without ``_compile``). Never raises.
    """
    import sys

    try:
        frame: Any = sys._getframe(1)
        for _ in range(max_depth):
            if frame is None:
                break
            if frame.f_code.co_name == "_compile" and frame.f_code.co_filename.endswith("convert_frame.py"):
                local = frame.f_locals
                fn, code = local.get("compiler_fn"), local.get("code")
                for _ in range(8):
                    if fn is None or hasattr(fn, marker):
                        return fn, code
                    nxt = (
                        getattr(fn, "_torchdynamo_orig_backend", None)
                        or getattr(fn, "compiler_fn", None)
                        or getattr(fn, "__wrapped__", None)
                    )
                    fn = None if nxt is fn else nxt
                return None, code
            frame = frame.f_back
    except Exception:
        pass
    return None, None


def dynamo_compile_kwargs() -> frozenset[str]:
    """The per-compile Dynamo settings this torch's ``torch.compile`` takes (``recompile_limit`` since 2.13)."""
    import inspect

    try:
        params = inspect.signature(torch.compile).parameters
    except (TypeError, ValueError):
        return frozenset()
    return frozenset(params) - {"model", "fullgraph", "dynamic", "backend", "mode", "options"}


def is_dynamo_setting(name: str) -> bool:
    """Whether ``torch._dynamo.config`` has a setting ``name``."""
    import torch._dynamo.config as dynamo_config

    settings = getattr(dynamo_config, "_config", None)  # ConfigModule's table of settings
    return name in settings if isinstance(settings, dict) else hasattr(dynamo_config, name)


# --- Inductor ------------------------------------------------------------------------------------------


def mode_options(mode: str | None) -> dict[str, Any]:
    """Inductor config patches that ``torch.compile(mode=...)`` would apply."""
    if not mode or mode == "default":
        return {}
    from torch._inductor import list_mode_options

    return dict(list_mode_options(mode))


def compile_fx(gm: torch.fx.GraphModule, example_inputs: list[Any], config_patches: Mapping[str, Any]) -> Any:
    """Inductor's ``compile_fx`` with the user's mode/options as config patches."""
    from torch._inductor.compile_fx import compile_fx as _compile_fx

    return _compile_fx(gm, example_inputs, config_patches=dict(config_patches) or None)


def undisabled(compiled: Any) -> Any:
    """The callable inside Dynamo's ``disable`` wrappers around a compiled graph (``compiled`` itself when it
    has none).

    Inductor's ``compile_fx`` returns its graph inside ``torch._dynamo.disable``; Dynamo wraps whatever a
    backend returns in that same wrapper again (``OutputGraph``: ``disable(compiled_fn)``, which unwraps a
    nested one first). A backend that puts its own callable around the graph would otherwise run two: the
    outer one already holds Dynamo off (``set_eval_frame(None)``) while the inner one runs four more
    ``set_eval_frame`` calls and three Python frames on every call of the graph. Only recursive disable
    wrappers are followed (their own ``_torchdynamo_wrapper_id`` check, as ``innermost_fn`` does)."""
    fn = compiled
    while (
        getattr(fn, "_torchdynamo_disable", False) is True
        and getattr(fn, "_torchdynamo_disable_recursive", False) is True
        and getattr(fn, "_torchdynamo_wrapper_id", None) == id(fn)
        and callable(getattr(fn, "_torchdynamo_orig_callable", None))
    ):
        fn = fn._torchdynamo_orig_callable
    return fn


@contextlib.contextmanager
def provenance_tracking(level: int) -> Iterator[None]:
    """Turn Inductor's provenance tracking on for the enclosed compiles (``level`` 0 leaves it alone)."""
    if level <= 0:
        yield
        return
    from torch._inductor import config

    with config.patch({"trace.provenance_tracking_level": level}):
        yield


def effective_provenance_level(level: int, config_patches: Mapping[str, Any]) -> int:
    """The provenance tracking level a compile with ``config_patches`` runs at under
    :func:`provenance_tracking` ``(level)``: the patched level (a release bundle records it in its options),
    else ``level``, else this process's Inductor setting (``0`` when it cannot be read)."""
    patched = config_patches.get("trace.provenance_tracking_level")
    if patched is not None:
        try:
            return int(patched)
        except (TypeError, ValueError):
            return 0
    if level > 0:
        return level
    try:
        from torch._inductor import config

        return int(config.trace.provenance_tracking_level)
    except Exception:
        return 0


_CACHE_ENTRY_DIRS: Final = {"fx_graph": ("fxgraph", True), "aot_autograd": ("aotautograd", False)}
"""Cache name → (folder under Inductor's cache directory, whether entries sit under ``key[1:3]`` first)."""


def cache_entry_bytes(cache: str, key: str) -> int:
    """Bytes on disk of the local cache entry for ``key`` of ``cache`` (``fx_graph`` or ``aot_autograd``),
    every file of its folder; 0 when there is none (a remote cache, another cache directory). Never raises."""
    import os

    where = _CACHE_ENTRY_DIRS.get(cache)
    if where is None or not key or "/" in key or key.startswith("."):
        return 0
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        folder, fanned = where
        root = os.path.join(cache_dir(), folder, *((key[1:3],) if fanned else ()), key)
        total = 0
        for base, _dirs, files in os.walk(root):
            total += sum(os.path.getsize(os.path.join(base, f)) for f in files)
        return total
    except Exception:
        return 0


def emit_trace_artifact(name: str, payload: Callable[[], str]) -> None:
    """Write a JSON artifact ``name`` into the structured trace (``payload`` is called only when a trace
    handler listens); inside a compile it belongs to that compile. Never raises."""
    try:
        from torch._logging import trace_structured  # type: ignore[attr-defined]

        trace_structured("artifact", metadata_fn=lambda: {"name": name, "encoding": "json"}, payload_fn=payload)
    except Exception:
        return


def emit_node_stack_traces(gm: Any, name: str) -> None:
    """Write ``{node name: stack_trace}`` of the graph about to be compiled into the structured trace of the
    compile in progress, as artifact ``name``."""

    def payload() -> str:
        graph = getattr(gm, "graph", None)
        nodes = graph.nodes if graph is not None else ()
        return json.dumps({n.name: n.meta["stack_trace"] for n in nodes if n.meta.get("stack_trace")})

    emit_trace_artifact(name, payload)


def soft_failure(fail_type: str) -> bool:
    """Whether a compile that failed with ``fail_type`` (the exception's class name in the compile's metrics) was
    suppressed whatever ``suppress_errors`` says: Dynamo suppresses ``Unsupported`` and ``UserError`` (a construct
    it cannot trace, such as an exception the compiled function raises with no handler in it) and skips the frame
    from then on. ``False`` for a name this torch does not define there."""
    known = _SOFT_FAILURES.get(fail_type)
    if known is None:
        try:
            import torch._dynamo.exc as dynamo_exc

            cls = getattr(dynamo_exc, fail_type, None)
            soft = (dynamo_exc.Unsupported, dynamo_exc.UserError)
            known = isinstance(cls, type) and issubclass(cls, soft)
        except Exception:
            known = False
        if len(_SOFT_FAILURES) < 256:  # failure types are few; a flood of odd names is not kept
            _SOFT_FAILURES[fail_type] = known
    return known


_SOFT_FAILURES: dict[str, bool] = {}


def errors_suppressed() -> bool:
    """Whether Dynamo now turns a failed compile into an eager run (``torch._dynamo.config.suppress_errors``);
    ``False`` when the setting cannot be read. A frame whose compile failed so is skipped from then on."""
    try:
        import torch._dynamo.config as dynamo_config

        return bool(getattr(dynamo_config, "suppress_errors", False))
    except Exception:
        return False


# --- CUDA streams and the static launcher (fingerprint hot path) --------------------------------------


def current_device() -> int:
    """Index of the calling thread's current CUDA device (``torch.cuda.current_device`` without its
    Python layers: this runs once per fingerprinted request)."""
    return int(torch._C._cuda_getDevice())


def raw_stream(device: int) -> int:
    """The raw handle of the calling thread's current stream on ``device`` (as Inductor's generated code
    reads it)."""
    return int(torch._C._cuda_getCurrentRawStream(device))


_SCALAR_ARGS: Final = {"i32": "i", "i64": "l", "u32": "I", "u64": "K", "fp32": "f", "fp64": "d"}


LaunchGrid = tuple[int, int, int, int, int]
"""``(programs, cols, stride_row, span, stream)`` of one fingerprint launch."""
StaticLaunch = Callable[[tuple[torch.Tensor, ...], tuple[int, ...], LaunchGrid], None]
"""``launch(tensors, pointers, (programs, cols, stride_row, span, stream))``: the kernel's pointer
parameters as tensors and as their addresses (``data_ptr()``), in the kernel's order."""


def static_cuda_launcher(compiled: Any, device: int) -> StaticLaunch:
    """A launcher for a compiled Triton kernel through Inductor's static CUDA launcher (one C++ call).

    ``compiled`` is Triton's ``CompiledKernel`` of the fingerprint kernel, whose non-constexpr
    parameters are pointers (two or more) then ``(n_cols, stride_row, span)``; the returned
    ``launch(tensors, pointers, (programs, cols, stride_row, span, stream))`` runs ``programs`` programs on
    ``stream`` of ``device`` (which must be the calling thread's current device); it reads only the
    pointers (device pointers, or pinned host memory the device can write under unified addressing).
    Raises when this torch or Triton lays the kernel out in a way the static launcher does not take
    (the caller keeps Triton's launch).
    """
    import os
    import tempfile

    from torch._C import _StaticCudaLauncher

    meta = compiled.metadata
    if getattr(meta, "num_ctas", 1) != 1:
        raise NotImplementedError("more than one CTA per program")
    scratch: list[None] = []
    for name in ("global_scratch_size", "profile_scratch_size"):
        if hasattr(meta, name):
            if getattr(meta, name) > 0:
                raise NotImplementedError(f"kernel needs {name}")
            scratch.append(None)  # newer Triton: a scratch pointer parameter the kernel never reads
    src = compiled.src
    names = list(src.fn.arg_names)

    def index(key: Any) -> int:
        return names.index(key) if isinstance(key, str) else int(key[0] if isinstance(key, tuple) else key)

    constants = {index(k) for k in getattr(src, "constants", {})}
    signature = {index(k): v for k, v in src.signature.items()}
    types = [signature[i] for i in sorted(signature) if signature[i] != "constexpr" and i not in constants]
    pointers = next((i for i, t in enumerate(types) if not t.startswith("*")), len(types))
    if pointers < 2 or len(types) != pointers + 3:
        raise NotImplementedError(f"unexpected kernel signature {types}")
    arg_tys = "O" * pointers + "".join(_SCALAR_ARGS[t] for t in types[pointers:]) + "O" * len(scratch)
    with tempfile.TemporaryDirectory(prefix="inferensics-fp-") as folder:
        path = os.path.join(folder, "kernel.cubin")
        with open(path, "wb") as fh:
            fh.write(compiled.asm["cubin"])
        loaded = _StaticCudaLauncher._load_kernel(path, meta.name, meta.shared, device)
    # (function, n_regs, n_spills) up to torch 2.12; (module, function, n_regs, n_spills) since
    function = loaded[0] if len(loaded) == 3 else loaded[1]
    num_warps, shared = int(meta.num_warps), int(meta.shared)
    run = _StaticCudaLauncher._launch_kernel
    tail = tuple(scratch)

    def launch(tensors: tuple[torch.Tensor, ...], ptrs: tuple[int, ...], grid: LaunchGrid) -> None:
        programs, cols, stride_row, span, stream = grid
        args = (*ptrs, cols, stride_row, span, *tail)
        run(function, programs, 1, 1, num_warps, shared, arg_tys, args, stream)

    return launch


def inline_wrapper_code() -> Any:
    """The code of Dynamo's inline wrapper, the frame it compiles for a torch-owned module or function
    (``nn.Sequential``, ``nn.Embedding``): one code object for all of them; ``None`` where this torch has none."""
    try:
        from torch._dynamo import external_utils

        return external_utils.wrap_inline(inline_wrapper_code).__code__
    except Exception:
        return None
