"""The one error type of the bundle part: a refusal or bad input, said in one line with its cause."""

from __future__ import annotations

from pathlib import Path
from typing import Final

CAUSES: Final = (
    "missing",
    "damaged",
    "tampered",
    "signature",
    "untrusted_builder",
    "revoked",
    "quarantined",
    "incompatible",
    "customisation",
    "bad_key",
    "bad_input",
    "unknown_id",
    "inaccurate",
)
"""Every refusal cause, in the order verification meets them; then ``inaccurate``, the build's own refusal to
sign compiled code whose output is outside tolerance (:mod:`inferensics.bundle.accuracy`)."""


class BundleError(ValueError):
    """A bundle was refused or an input was bad.

    ``str(error)`` is one line saying what is wrong and what to do; ``cause`` is one of :data:`CAUSES`
    so callers (the host SDK, the CLI, tests) can count refusals by kind.

    Args:
        cause: One of :data:`CAUSES`.
        message: What is wrong and what to do, in one line.
    """

    def __init__(self, cause: str, message: str) -> None:
        if cause not in CAUSES:
            raise ValueError(f"unknown bundle error cause {cause!r}")
        super().__init__(message.replace("\n", " "))
        self.cause = cause


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message``: an exception in one line (a model's, a compiler's) inside a refusal
    or a replay's report."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def unwritable(path: Path, exc: OSError, option: str = "--out") -> BundleError:
    """The ``bad_input`` refusal of an output file that cannot be written: a missing folder or a directory in
    its place named as such (Python's own words otherwise), and the option that chose it."""
    if not path.parent.is_dir():
        why = f"the folder {path.parent} does not exist"
    elif path.is_dir():
        why = "it is a directory"
    else:
        why = exc.strerror or str(exc)
    return BundleError(
        "bad_input", f"cannot write {path}: {why}: choose another {option} (a file in an existing folder)"
    )
