"""The kernel registry as replay sees it: which graph nodes are registry ops, forcing them to the reference
provider, the provider a call was served by, and where that provider's code lives.

A registry op (``torch.ops.inferensics.<op>``) dispatches to the first provider its priority list allows, in
eager and while a compiler traces it. Replay's ``kernel_provider`` rung re-runs the request with every op
(then one op at a time) forced to its reference provider: if that fixes the output, the provider is at
fault. Forcing and pinning only change priority lists, through the registry's public API, and restore them.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from inferensics import kernels
from inferensics.kernels.op import NAMESPACE, REFERENCE, SemanticOp
from inferensics.kernels.requirements import CallContext


def registry_op(node: torch.fx.Node) -> SemanticOp | None:
    """The semantic op a Dynamo graph node calls, or ``None``."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return None
    if getattr(target, "namespace", None) != NAMESPACE:
        return None
    name = target._schema.name.partition("::")[2] if isinstance(target, torch._ops.OpOverload) else target.__name__
    return kernels.registry().ops.get(name)


def registry_nodes(gm: torch.fx.GraphModule) -> list[tuple[torch.fx.Node, SemanticOp]]:
    """Every node of ``gm`` that calls a registry op, in graph order."""
    out = []
    for node in gm.graph.nodes:
        op = registry_op(node)
        if op is not None:
            out.append((node, op))
    return out


def _saved(op: SemanticOp) -> tuple[list[str], dict[str, list[str]], dict[tuple[str, str], str]]:
    return list(op.priority), {b: list(v) for b, v in op.bucket_priority.items()}, dict(op.refused)


def _restore(op: SemanticOp, saved: tuple[list[str], dict[str, list[str]], dict[tuple[str, str], str]]) -> None:
    priority, buckets, refused = saved
    op.refused.clear()
    op.refused.update(refused)
    for bucket in [b for b in op.bucket_priority if b not in buckets]:
        del op.bucket_priority[bucket]
    for bucket, order in buckets.items():
        op.set_priority(order, bucket)
    op.set_priority(priority)  # also drops the op's cached decisions


@contextlib.contextmanager
def forced_reference(names: Iterable[str] | None = None) -> Iterator[list[str]]:
    """Within the block, the named registry ops (all when ``None``) are served by their reference provider.

    Yields the op names forced; their priority lists are restored on exit.
    """
    ops = kernels.registry().ops
    chosen = [n for n in (ops if names is None else names) if n in ops]
    saved = {n: _saved(ops[n]) for n in chosen}
    try:
        for n in chosen:
            for bucket in list(ops[n].bucket_priority):
                ops[n].set_priority([], bucket)
            ops[n].set_priority([])
        yield chosen
    finally:
        for n in chosen:
            _restore(ops[n], saved[n])


@contextlib.contextmanager
def pinned_policy(state: Mapping[str, Any] | None) -> Iterator[list[str]]:
    """Within the block, the registry follows a recorded policy (a bundle's ``kernel_registry`` factor: the
    state :func:`inferensics.kernels.registry_state` returned when it was built).

    Yields one line per entry that could not be applied (an op or provider this process does not have);
    the rest is applied. Priorities and refusals are restored on exit.
    """
    policy = dict((state or {}).get("policy") or {})
    if not policy:
        yield []
        return
    reg = kernels.registry()
    names = [n for n in policy if n in reg.ops]
    saved = {n: _saved(reg.ops[n]) for n in names}
    try:
        yield reg.apply_policy(policy)
    finally:
        for n in names:
            _restore(reg.ops[n], saved[n])


@dataclass(frozen=True)
class ProviderSource:
    """Where a provider's kernel function is defined."""

    function: str = ""
    file: str = ""
    line: int = 0
    text: str = ""


def _resolve(fn: Callable[..., Any]) -> Any:
    """The function a provider wrapper runs: ``__wrapped__``, a lazily imported Triton provider's op (its ``entry``,
    ``kernels/ops/common.triton_fn``), or itself."""
    fn = inspect.unwrap(fn)
    entry = getattr(fn, "entry", None)
    if callable(entry):
        try:
            return inspect.unwrap(entry())
        except Exception:  # the Triton module does not import here
            return fn
    return fn


def provider_source(fn: Callable[..., Any]) -> ProviderSource:
    """The kernel function behind a provider: qualified name, file, the line of its ``def`` and that line."""
    target = _resolve(fn)
    target = getattr(target, "_init_fn", None) or target  # a torch.library custom op (``triton_op``)
    for _ in range(4):  # torch's own wrappers (triton_op's backend function) hold the user's function as ``fn``
        if not str(getattr(target, "__module__", "")).startswith("torch."):
            break
        try:
            inner = inspect.getclosurevars(target).nonlocals.get("fn")
        except (TypeError, ValueError):
            break
        if not callable(inner):
            break
        target = inspect.unwrap(inner)
    qualified = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', repr(target))}".lstrip(".")
    try:
        file = inspect.getsourcefile(target) or ""
        lines, start = inspect.getsourcelines(target)
    except (TypeError, OSError):
        return ProviderSource(qualified)
    offset = next((i for i, t in enumerate(lines) if t.lstrip().startswith(("def ", "async def "))), 0)
    line = start + offset
    return ProviderSource(qualified, file, line, linecache.getline(file, line).strip())


@dataclass(frozen=True)
class Served:
    """The provider that served one registry call, and why the ones before it were skipped."""

    op: str
    provider: str
    kind: str
    bucket: str
    signature: str
    compiled: bool
    skipped: list[dict[str, str]]
    source: ProviderSource

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d = asdict(self)
        src = d.pop("source")
        return {**d, **{f"provider_{k}": v for k, v in src.items()}}


def served_by(op: SemanticOp, args: Sequence[Any], *, compiled: bool, provider: str | None = None) -> Served:
    """The decision the registry takes for a call with ``args`` (eager, or while a compiler traces it);
    ``provider`` names the provider instead (a call traced with symbolic sizes took the default list)."""
    ctx = CallContext.of(args)
    if compiled:
        ctx = CallContext(ctx.platform, ctx.capability, True, ctx.device)
    decision = op.select(args, ctx)
    if provider is not None and provider != decision.provider:
        decision = replace(decision, provider=provider, skipped=())
    provider_obj = op.providers[decision.provider]
    fn = op.reference if provider_obj.kind == "inductor" else provider_obj.fn
    return Served(
        op=f"{NAMESPACE}::{op.name}",
        provider=decision.provider,
        kind=provider_obj.kind,
        bucket=decision.bucket,
        signature=decision.signature,
        compiled=compiled,
        skipped=[{"provider": p, "reason": r} for p, r in decision.skipped],
        source=provider_source(fn),
    )


def run_provider(op: SemanticOp, provider: str, args: Sequence[Any]) -> Any:
    """Run one provider's function (the reference for ``inductor``) on concrete arguments, without autograd."""
    p = op.providers[provider]
    fn = op.reference if p.kind == "inductor" or provider == REFERENCE else p.fn
    with torch.no_grad():
        return fn(*args)
