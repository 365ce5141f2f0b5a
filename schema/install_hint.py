"""The ``pip install`` line that adds an optional extra to *this* installation of inferensics.

inferensics is not on PyPI, so ``pip install 'inferensics[service]'`` would search the index and fail. The
line names what this environment was installed from, as pip recorded it (PEP 610's ``direct_url.json``):
an editable checkout (``pip install -e '/src/inferensics[service]'``), a checkout or a wheel file
(``pip install '/dist/inferensics-0.1.0-py3-none-any.whl[service]'``), a URL or VCS reference
(``pip install 'inferensics[service] @ git+https://…@<commit>'``); the bare name only when pip recorded no
origin (an index install).

Lives in ``schema`` because the store's and Arrow's import errors need it and ``schema`` imports nothing
else of ours; the command line's extras check (:mod:`inferensics.cli.extras`) uses the same line.
"""

from __future__ import annotations

import functools
import json
from importlib import metadata
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["pip_install_hint", "pip_install_line"]


def pip_install_line(extra: str, direct_url: str | None) -> str:
    """The ``pip install`` line for ``extra``, given the text of the distribution's ``direct_url.json``.

    Args:
        extra: an optional-dependency group of ``pyproject.toml`` (``service``, ``dashboard``, ``demo``, ``all``).
        direct_url: the file's text, or ``None`` when pip wrote none (an install from an index).
    """
    info = _parse(direct_url) or {}
    url = info.get("url")
    if not isinstance(url, str) or not url:
        return f"pip install 'inferensics[{extra}]'"
    vcs = info.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        commit = vcs.get("commit_id")
        ref = f"{vcs['vcs']}+{url}" + (f"@{commit}" if isinstance(commit, str) and commit else "")
        return f"pip install 'inferensics[{extra}] @ {ref}'"
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return f"pip install 'inferensics[{extra}] @ {url}'"
    path = unquote(parsed.path)
    dir_info = info.get("dir_info")
    editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
    return f"pip install {'-e ' if editable else ''}'{path}[{extra}]'"


def _parse(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


@functools.cache
def _direct_url() -> str | None:
    # A checkout's build leaves an ``inferensics.egg-info`` beside the sources, which shadows the installed
    # metadata when the checkout is on ``sys.path``: take the first copy that records where it came from.
    for dist in metadata.distributions(name="inferensics"):
        text = dist.read_text("direct_url.json")
        if text:
            return text
    return None


def pip_install_hint(extra: str) -> str:
    """The ``pip install`` line that adds ``extra`` to the inferensics this process imported."""
    return pip_install_line(extra, _direct_url())
