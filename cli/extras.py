"""Which optional extra each command needs, and the one line it prints when that extra is missing.

Installing inferensics without extras is the slim install of a serving host (the host SDK and this command line);
the commands that run the service, read the store, draw the dashboard or run the demo need an extra
(pyproject.toml's ``[project.optional-dependencies]`` declares the same names). A command checks its
extra before it imports anything from it, so a missing package is one line and exit 2, never a traceback;
the line's ``pip install`` names what this environment was installed from (:mod:`inferensics.schema.install_hint`).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Mapping
from typing import Final, ParamSpec, TypeVar

from inferensics.cli.errors import fail
from inferensics.schema.install_hint import pip_install_hint

_SERVICE: Final = ("clickhouse_connect", "chdb", "pyarrow", "polars", "starlette", "uvicorn", "httpx")
EXTRAS: Final[Mapping[str, tuple[str, ...]]] = {
    "service": _SERVICE,
    "dashboard": (*_SERVICE, "streamlit", "altair", "vl_convert"),
    "demo": (*_SERVICE, "streamlit", "altair", "vl_convert", "transformers"),
}
"""Each extra and the top-level modules that tell whether it is installed."""

P = ParamSpec("P")
R = TypeVar("R")


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here, in declaration order."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require_extra(extra: str, command: str) -> None:
    """Exit 2 with one line naming ``extra`` when one of its modules is missing; return otherwise."""
    missing = missing_modules(extra)
    if missing:
        fail(
            f"`inferensics {command}` needs the {extra} extra ({', '.join(missing)} not installed): "
            f"{pip_install_hint(extra)}"
        )


def needs_extra(extra: str, command: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a command so that it checks ``extra`` (see :func:`require_extra`) before it runs."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)  # typer reads the options from the wrapped signature
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            require_extra(extra, command)
            return fn(*args, **kwargs)

        return checked

    return wrap
