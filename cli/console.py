"""The CLI's consoles: standard output in plain text, and standard error for the one-line errors.

What the commands print is mostly data (op requirements, shapes, error messages, bundle names), and rich reads
any ``[word ...]`` in a string as a markup tag and drops it: ``cos/sin [positions, D/2]`` printed as
``cos/sin , rows contiguous``. So markup is off here; a line that wants a style passes ``markup=True`` and
escapes its data (``rich.markup.escape``).
"""

from __future__ import annotations

from rich.console import Console

console = Console(highlight=False, soft_wrap=True, markup=False)
"""Standard output of every command (no markup, no highlighting, long lines kept whole)."""
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
"""Standard error: the one-line errors of :func:`inferensics.cli.errors.fail` (styled, their text escaped)."""
