"""Which providers a compiled graph holds, folded into the compile caches' keys.

AOTAutograd's cache keys a graph on the graph Dynamo traced, where a registry op is one node
(``torch.ops.inferensics.silu_mul``) whatever provider the compile traces into it. After a priority change,
applied evidence or a quarantine, a lookup would return the code of the provider chosen when the entry was
saved (by this process or another), and the compile would record no decision. So while a compile traces
registry ops, each decision it makes is folded into ``torch.compiler.config.cache_key_tag``, which the
AOTAutograd and FX-graph keys both hash: the same graph with the same providers hits, in any process; with
another provider it misses and compiles that provider. A graph without registry ops keeps the tag it had.

The tag is put back when the compile ends (and when the next one starts), through Dynamo's compile
callbacks, asked for again at each decision because ``torch._dynamo.reset()`` forgets them; a salt left by a
compile whose end went unseen is recognised by its compile (tracing context) and not carried into the next.
A tag the user set is kept. Decisions outside a compile (a bare fake-tensor trace) look up no cache and
change nothing.
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from inferensics.kernels import _torch_adapter
from inferensics.kernels.decisions import Decision

MARK: Final = "inferensics-providers:"
"""Precedes the digest of a graph's provider decisions in the tag."""

_SALT: Final = re.compile(rf"\|?{re.escape(MARK)}[0-9a-f]{{32}}$")


def user_tag(tag: str) -> str:
    """``tag`` without the salt this module adds during a compile: the tag the user (or other code) set.

    The salt is a digest of one compile's provider decisions, so it differs from graph to graph and is no
    setting of the process: what decides it is the registry's state, which a bundle records on its own.

    >>> user_tag("mine|inferensics-providers:" + "0" * 32)
    'mine'
    >>> user_tag("mine")
    'mine'
    """
    return _SALT.sub("", tag)


@dataclass
class _State:
    base: str = ""
    """The tag before this module changed it (the user's, or empty)."""
    salted: str | None = None
    """The tag this module set for the compile in progress; ``None`` when none is in force."""
    entries: set[str] = field(default_factory=set)
    """``op=provider@signature`` of each decision of the compile in progress."""
    compile: Callable[[], Any] = field(default=lambda: None)
    """A weak reference to the compile (its tracing context) the entries belong to."""


_STATE = _State()
_LOCK = threading.Lock()


def note(decision: Decision) -> None:
    """Fold ``decision`` (made while compiling) into the cache-key tag of the compile in progress; nothing
    outside a compile (a bare fake-tensor trace looks up no cache)."""
    compile_ = _torch_adapter.current_trace()
    if compile_ is None:
        return
    entry = f"{decision.op}={decision.provider}@{decision.signature}"
    _torch_adapter.on_compile_start_and_end(restore)
    with _LOCK:
        current = _torch_adapter.cache_key_tag()
        if _STATE.salted is None or current != _STATE.salted:  # no salt in force, or the tag was set since
            _STATE.base, _STATE.entries = current, set()
        elif _STATE.compile() is not compile_:  # left by a compile whose end was not seen (reset() forgot us)
            _STATE.entries = set()
        elif entry in _STATE.entries:
            return
        _STATE.compile = _weak(compile_)
        _STATE.entries.add(entry)
        digest = hashlib.sha256("\n".join(sorted(_STATE.entries)).encode()).hexdigest()[:32]
        _STATE.salted = f"{_STATE.base}{'|' if _STATE.base else ''}{MARK}{digest}"
        _torch_adapter.set_cache_key_tag(_STATE.salted)


def restore(_args: Any = None) -> None:
    """Put the tag back as it was before the compile's decisions (a compile ended, or one is starting)."""
    with _LOCK:
        if _STATE.salted is not None and _torch_adapter.cache_key_tag() == _STATE.salted:
            _torch_adapter.set_cache_key_tag(_STATE.base)
        _STATE.salted, _STATE.entries = None, set()


def _weak(obj: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(obj)
    except TypeError:  # not weakly referenceable: compared by identity while it lives
        return lambda: obj
