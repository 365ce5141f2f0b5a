"""Where a compiled frame's code lives, written the same on every machine: ``path:first line:name`` with the
path spelled by its module's import name (``model.py``, ``transformers/models/gpt2/modeling_gpt2.py``).

A decorated ``forward`` is named by the model's own code through
:func:`inferensics.schema.locations.entry_codes`, as the host SDK names it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from inferensics.schema.locations import Entry


def portable_path(filename: str) -> str:
    """``filename`` as its module's import name spells it (``tests/bundle/models.py`` for module
    ``tests.bundle.models``), which no checkout or ``sys.path`` order changes; else relative to the deepest
    ``sys.path`` entry holding it; else its base name (a script run as ``__main__`` too)."""
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == filename and name != "__main__":
            package = Path(filename).name == "__init__.py"
            return "/".join(name.split(".")) + ("/__init__.py" if package else Path(filename).suffix)
    try:
        path = Path(filename).resolve()
        roots = sorted({Path(p).resolve() for p in sys.path if p}, key=lambda p: len(p.parts), reverse=True)
        for root in roots:
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix()
        return path.name
    except (OSError, ValueError):
        return Path(filename).name


def code_location(code: Any, entries: dict[Any, Entry] | None = None) -> str:
    """``path:first line:name`` of ``code`` (of the model's own ``forward`` when ``code`` is the wrapper of
    an entry in ``entries``); ``""`` for no code."""
    if code is None:
        return ""
    own, name = (entries or {}).get(code, (code, getattr(code, "co_qualname", code.co_name)))
    return f"{portable_path(own.co_filename)}:{own.co_firstlineno}:{name}"
