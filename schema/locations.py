"""Where a compiled frame's code lives, as compile-side rows name it (``code_location``: ``path:first
line:name``), when the frame Dynamo traced is a decorator's wrapper.

A model whose ``forward`` is wrapped by a decorator (Hugging Face wraps every model's) is compiled from the
wrapper's frame; :func:`entry_codes` maps the wrapper's code to the model's own ``forward``, so a location
names the user's code rather than the decorator. A module whose ``forward`` is torch's own (``nn.Sequential``,
``nn.Embedding``) is compiled from the frame of Dynamo's inline wrapper, one code object for every such
module: given that code (each part's torch adapter reads it), the map names the module's ``forward`` too.
The host SDK and bundles both read it: it lives here, below both, and needs only the standard library
(compiling a model never imports the bundle package).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

Entry = tuple[Any, str]
"""``(code object, qualified name)`` of a model's own ``forward``."""


def entry_codes(model_or_fn: Any, inline_wrapper: Any = None) -> dict[Any, Entry]:
    """``{wrapper code: (own code, qualified name)}`` when the entry point (a module's ``forward``, or the
    function itself) is a decorator's wrapper, and for ``inline_wrapper`` (the code of Dynamo's inline
    wrapper, when given); empty otherwise, and for a callable :mod:`inspect` cannot read."""
    try:
        torch = sys.modules.get("torch")  # a module exists only once torch is imported
        module = torch is not None and isinstance(model_or_fn, torch.nn.Module)
        entry = type(model_or_fn).forward if module else model_or_fn
        own = inspect.unwrap(entry)
        wrapper_code, own_code = getattr(entry, "__code__", None), getattr(own, "__code__", None)
        if own_code is None:
            return {}
        out: dict[Any, Entry] = {}
        if wrapper_code is not None and wrapper_code is not own_code:
            out[wrapper_code] = (own_code, own.__qualname__)
        if inline_wrapper is not None:
            # Only a torch-owned entry point is compiled from this frame (or every one, under Dynamo's
            # wrap_top_frame): it is this model's.
            out[inline_wrapper] = (own_code, own.__qualname__)
        return out
    except Exception:  # a callable inspect cannot read: the compiled frame's own location stays
        return {}
