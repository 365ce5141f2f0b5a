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
==============================================  ============  ============
"""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def provenance_tracking(level: int) -> Iterator[None]:
    """Turn Inductor's provenance tracking on for the enclosed compiles (``level`` 0 leaves it alone)."""
    if level <= 0:
        yield
        return
    from torch._inductor import config

    with config.patch({"trace.provenance_tracking_level": level}):
        yield


def dynamo_reset() -> None:
    """``torch._dynamo.reset()``: drop every compiled entry of this process."""
    import torch._dynamo

    torch._dynamo.reset()
