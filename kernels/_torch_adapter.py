"""Every touch of PyTorch's private modules by the kernel registry, in one place.

The registry needs what PyTorch keeps private: whether a call is being traced by a compiler (its arguments
are fake tensors), the id of the compile in progress, the structured trace log, where a compiled graph's
provider decisions are written as an artifact beside Inductor's own (the host SDK's trace sink and the
trace-log importer read it from there), and, to prove a provider on real tensors before a compile commits to
it, the sizes a trace's symbols stand for and a way to step outside the trace. Each is guarded: a torch
without the API reads as "not compiling", "no log" or "cannot prove", never an error in the serving path.

It also writes the registry's part of ``torch.compiler.config.cache_key_tag``, the public setting that enters
the keys of Inductor's FX graph cache and the AOTAutograd cache. Those caches key on the Dynamo graph, which
holds ``torch.ops.inferensics.<op>`` and not the provider traced in: without the policy in the tag, a compile
after a priority change, a refusal or a quarantine would be served the graph traced with the provider chosen
before. The tag is composed here for every writer (the bundle part writes its customisations' salt through
:func:`set_cache_tag_part` too): the user's own tag first, then one ``name-value`` part per writer, each writer
replacing only its own.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import torch

from inferensics.schema.events import KERNEL_DECISIONS_ARTIFACT as DECISIONS_ARTIFACT


def tracing(args: Iterable[Any]) -> bool:
    """Whether any tensor in ``args`` is a fake tensor (Dynamo or AOTAutograd tracing a graph)."""
    try:
        from torch._guards import detect_fake_mode

        return detect_fake_mode(tuple(a for a in args if isinstance(a, torch.Tensor))) is not None
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


def emit_decisions(payload: Callable[[], list[dict[str, Any]]]) -> None:
    """Write provider decisions into the structured trace of the compile in progress (lazily: the payload is
    built only when a trace handler listens)."""
    try:
        from torch._logging import trace_structured  # type: ignore[attr-defined]

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
            return int(read(value))
        node = value.node
        known = getattr(node, "_hint", None)
        return known if known is not None else getattr(node, "hint", None)
    except Exception:
        return None


@contextlib.contextmanager
def outside_tracing() -> Iterator[None]:
    """Run real tensor code in the middle of a trace: the fake, proxy and functionalization modes of the
    compile in progress are set aside (so nothing created here is fake or recorded into the graph), and
    restored after."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.utils._python_dispatch import _disable_current_modes

    with unset_fake_temporarily(), _disable_current_modes(), torch.no_grad():
        yield


CACHE_TAG_SEP: Final = "|inferensics:"
"""Starts each of our parts of ``torch.compiler.config.cache_key_tag``; what comes before the first is the user's."""
KERNELS_TAG_PART: Final = "kernels"
"""The registry's part of the tag: a digest of every semantic op's selection policy and quarantines."""
_TAG_LOCK = threading.Lock()
_KERNELS_SALT = [""]


def cache_tag_parts(tag: str) -> tuple[str, dict[str, str]]:
    """``(the user's own tag, our parts by name)`` of a ``cache_key_tag`` that :func:`compose_cache_tag` wrote."""
    base, *rest = str(tag or "").split(CACHE_TAG_SEP)
    parts: dict[str, str] = {}
    for part in rest:
        name, _, value = part.partition("-")
        parts[name] = value
    return base, parts


def compose_cache_tag(base: str, parts: Mapping[str, str]) -> str:
    """The user's tag ``base`` followed by ``|inferensics:<name>-<value>`` for each non-empty part, in name
    order (the bundle's ``customisations`` part, as earlier releases wrote it alone, then ``kernels``)."""
    return str(base) + "".join(f"{CACHE_TAG_SEP}{n}-{v}" for n, v in sorted(parts.items()) if v)


def set_cache_tag_part(name: str, value: str) -> None:
    """Replace our part ``name`` of ``torch.compiler.config.cache_key_tag`` with ``value`` (removed when empty),
    keeping the user's own tag and the other parts."""
    try:
        import torch.compiler.config as compiler

        with _TAG_LOCK:
            current = str(compiler.cache_key_tag or "")
            base, parts = cache_tag_parts(current)
            parts[name] = value
            tag = compose_cache_tag(base, parts)
            if tag != current:
                compiler.cache_key_tag = tag
    except Exception:
        return


def set_kernels_salt(salt: str) -> None:
    """The registry's policy changed: its part of the tag becomes ``salt``."""
    _KERNELS_SALT[0] = salt
    set_cache_tag_part(KERNELS_TAG_PART, salt)


def sync_cache_tag() -> None:
    """Write the registry's current salt into the tag again (after someone set the whole tag, e.g. restored it)."""
    if _KERNELS_SALT[0]:
        set_cache_tag_part(KERNELS_TAG_PART, _KERNELS_SALT[0])
