"""A provider: one implementation of a semantic op, with what it needs of the call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from inferensics.kernels.requirements import CallContext, Requirements

ProviderKind = Literal["reference", "inductor", "triton", "vendor"]
PROVIDER_KINDS: tuple[ProviderKind, ...] = ("reference", "inductor", "triton", "vendor")


@dataclass(frozen=True, slots=True)
class Provider:
    """One implementation of a semantic op.

    Attributes:
        name: Unique within its op (``reference``, ``inductor``, ``triton``, ``sdpa`` ...).
        kind: ``reference`` (the op's definition), ``inductor`` (the reference left to the compiler),
            ``triton`` (our kernels) or ``vendor`` (a library path such as SDPA backends).
        fn: Callable with the op's signature.
        requirements: What it needs of the call.
        doc: One line on what it is.
    """

    name: str
    kind: ProviderKind
    fn: Callable[..., Any]
    requirements: Requirements
    doc: str = ""

    def supports(self, args: Sequence[Any], ctx: CallContext) -> tuple[bool, str]:
        """Whether this provider can serve a call with ``args`` in ``ctx``, and why not."""
        return self.requirements.supports(args, ctx)

    def describe(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {"name": self.name, "kind": self.kind, "doc": self.doc, "requirements": self.requirements.describe()}


def plain_eager_entry(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What serves a call with ``fn`` for a caller that has just found the call plain eager and not compiling (the
    eager hot path of :meth:`~inferensics.kernels.SemanticOp.__call__`): the ``plain_eager_entry`` a provider
    function offers, which does not ask that again, else ``fn`` itself."""
    entry: Callable[..., Any] = getattr(fn, "plain_eager_entry", fn)
    return entry
