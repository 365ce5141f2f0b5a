"""Where a compiled frame's code lives, as compile-side rows name it (``code_location``: ``path:first
line:name``), when the frame Dynamo traced is a decorator's wrapper.

A model whose ``forward`` is wrapped by a decorator (Hugging Face wraps every model's) is compiled from the
wrapper's frame; :func:`entry_codes` maps the wrapper's code to the model's own ``forward``, so a location
names the user's code rather than the decorator. The host SDK and bundles both read it: it lives here, below
both, and needs only the standard library (compiling a model never imports the bundle package).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

Entry = tuple[Any, str]
"""``(code object, qualified name)`` of a model's own ``forward``."""


def entry_codes(model_or_fn: Any) -> dict[Any, Entry]:
    """``{wrapper code: (own code, qualified name)}`` when the entry point (a module's ``forward``, or the
    function itself) is a decorator's wrapper; empty otherwise, and for a callable :mod:`inspect` cannot read."""
    try:
        torch = sys.modules.get("torch")  # a module exists only once torch is imported
        module = torch is not None and isinstance(model_or_fn, torch.nn.Module)
        entry = type(model_or_fn).forward if module else model_or_fn
        own = inspect.unwrap(entry)
        wrapper_code, own_code = getattr(entry, "__code__", None), getattr(own, "__code__", None)
        if wrapper_code is None or own_code is None or wrapper_code is own_code:
            return {}
        return {wrapper_code: (own_code, own.__qualname__)}
    except Exception:  # a callable inspect cannot read: the compiled frame's own location stays
        return {}
