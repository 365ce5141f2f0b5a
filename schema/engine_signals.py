"""The process's own handling of fatal signals, kept while the embedded engine (chDB) loads.

chDB is the ClickHouse server built as a library. Loading it installs ClickHouse's handlers for the fatal
signals (SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS) and for SIGTSTP. In a server of its own
those log a symbolised stack trace; inside a serving process they replace what the process had there
(the default action, :mod:`faulthandler`'s report that the host SDK's crash journal reads, a framework's
own handler), a crash in any library of the process then waits minutes while ClickHouse symbolises its stack
before the process dies, and Ctrl-Z no longer stops it. :func:`kept` puts back the dispositions that were in
place before the engine loaded, byte for byte (``sigaction`` read and written through :mod:`ctypes`), and
leaves the engine's other handlers (its query profiler's real-time signal) alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import sys
from collections.abc import Iterator
from typing import Final

log = logging.getLogger(__name__)

TAKEN: Final = tuple(
    getattr(signal, name)
    for name in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGTRAP", "SIGSYS", "SIGTSTP")
    if hasattr(signal, name)
)
"""The signals whose handling loading chDB replaces with ClickHouse's."""
ENGINE_MODULE: Final = "chdb"
_SIGACTION_BYTES: Final = 512  # more than any libc's struct sigaction: the bytes are copied back as read
HANDLER_BYTES: Final = ctypes.sizeof(ctypes.c_void_p)
"""The handler's address, the first member of a ``struct sigaction``."""


def dispositions() -> dict[int, bytes]:
    """Each taken signal's ``struct sigaction`` as libc reports it (empty where libc has no ``sigaction``)."""
    try:
        sigaction = ctypes.CDLL(None, use_errno=True).sigaction
    except (OSError, AttributeError):  # not a POSIX libc (Windows): nothing to keep
        return {}
    out = {}
    for signum in TAKEN:
        buffer = ctypes.create_string_buffer(_SIGACTION_BYTES)
        if sigaction(signum, None, buffer) == 0:
            out[signum] = buffer.raw
    return out


def restore(saved: dict[int, bytes]) -> list[int]:
    """Put ``saved`` (from :func:`dispositions`) back; the signals whose disposition had changed."""
    if not saved:
        return []
    sigaction = ctypes.CDLL(None, use_errno=True).sigaction
    now = dispositions()
    # The handler is the struct's first member; the bytes after its mask are not always written alike.
    changed = [s for s, raw in saved.items() if now.get(s, b"")[:HANDLER_BYTES] != raw[:HANDLER_BYTES]]
    for signum, raw in saved.items():
        if sigaction(signum, ctypes.create_string_buffer(raw, _SIGACTION_BYTES), None) != 0:
            log.warning(
                "inferensics: could not restore the handler of %s after loading chDB (errno %d); a crash in "
                "this process may wait minutes for ClickHouse's stack trace before it ends",
                signal.Signals(signum).name, ctypes.get_errno(),
            )  # fmt: skip
    return changed


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """Load the engine inside this block: the process's handling of :data:`TAKEN` is what it was before.

    Only the first load installs ClickHouse's handlers, so when the engine is already loaded (by other code
    in the process) nothing is read or written.
    """
    if ENGINE_MODULE in sys.modules:
        yield
        return
    saved = dispositions()
    try:
        yield
    finally:
        restore(saved)
