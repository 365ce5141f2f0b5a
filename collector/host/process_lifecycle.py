"""The process's one tracker through the process's life: replaced by a second ``instrument()``, copied into a
forked child, shut down at interpreter exit or on SIGTERM (``SdkConfig.sigterm_handler``).

The hooks a tracker installs (the trace logger's handler, Dynamo's guard hook) are process-global, so one tracker
is active at a time. A tracker that stops being the active one while code still holds it (a server that calls
``instrument()`` once per model; a worker that makes its own tracker and still serves through the parent's module
global) hands its request scopes to the active one instead of queueing records nothing drains.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from inferensics.collector.host.request_tracker import Tracker

log = logging.getLogger("inferensics.collector.host")


class _Registry:
    """The active tracker, and the trackers it replaced that code may still hold."""

    def __init__(self) -> None:
        self.active: Tracker | None = None
        self.replaced: weakref.WeakSet[Tracker] = weakref.WeakSet()
        self.exit_hook = False
        self.sigterm_hook = False


SIGTERM_SHUTDOWN_S: Final = 10.0
"""Seconds a SIGTERM waits at most for the tracker's shutdown (its flush and the exporter's are bounded by less)
before the process ends as SIGTERM ends it."""

_REGISTRY = _Registry()


def active_tracker() -> Tracker | None:
    """The process's tracker, if one is installed."""
    return _REGISTRY.active


def deactivate(tracker: Tracker) -> None:
    """``tracker`` is shut down: no longer the process's tracker. The trackers it replaced journal their scopes'
    requests in its journal (``Tracker.hand_over``): none where it closed it."""
    if _REGISTRY.active is tracker:
        _REGISTRY.active = None
    for replaced in list(_REGISTRY.replaced):
        if replaced.successor is tracker:
            replaced.journal = tracker.journal


def replace_active(factory: Callable[[], Tracker]) -> Tracker:
    """Shut down the active tracker (hooks are process-global), then build and activate a new one; the trackers
    it replaced send what their request scopes record to the new one (``Tracker.hand_over``)."""
    old = _REGISTRY.active
    if old is not None:
        if not old._forked:  # a forked worker's own instrument() is the documented way, not a surprise
            log.warning(
                "inferensics: a second instrument() call replaces the active tracker; requests scoped with the "
                "first are recorded by the second (one tracker per process: compile each model with name=)"
            )
        old.shutdown()
    tracker = factory()
    _REGISTRY.active = tracker
    if old is not None:
        _REGISTRY.replaced.add(old)
    for replaced in list(_REGISTRY.replaced):
        replaced.hand_over(tracker)
    if not _REGISTRY.exit_hook:
        atexit.register(_shutdown_at_exit)
        _REGISTRY.exit_hook = True
    if not tracker.config.sigterm_handler:
        _leave_sigterm_alone()
    elif not _REGISTRY.sigterm_hook:
        _REGISTRY.sigterm_hook = True
        _flush_on_sigterm()
    return tracker


def _after_fork_in_child() -> None:
    tracker = _REGISTRY.active
    if tracker is not None:
        tracker.after_fork_in_child()
    for replaced in list(_REGISTRY.replaced):  # they send to the parent's tracker: dropped here too
        replaced._forked, replaced.successor, replaced.journal = True, None, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _shutdown_at_exit(*, killed: bool = False) -> None:
    # A script that serves a few requests and ends would lose what the background thread had not yet
    # exported, without a word: the active tracker is flushed (bounded) and shut down at exit. A process about to
    # be killed (``killed``) keeps its crash journal: the requests it is still in die with it.
    tracker = _REGISTRY.active
    if tracker is not None:
        try:
            tracker._end(close_journal=not killed)
        except Exception as exc:  # never raise from an exit hook
            log.warning("inferensics: shutdown at exit failed (%s: %s)", type(exc).__name__, exc)


def _flush_on_sigterm() -> None:
    """Shut the tracker down on SIGTERM, where the process left SIGTERM's default action (which ends it without
    running exit hooks): a server stopped by its supervisor (Kubernetes, systemd) would lose every record the
    background thread had not exported yet, uncounted. A handler the process set itself (uvicorn's, gunicorn's)
    is left alone: it exits through the exit hooks. Only the main thread can set one.

    ``SdkConfig(sigterm_handler=False)`` or ``$INFERENSICS_SIGTERM_HANDLER=0`` turns this off
    (:func:`_leave_sigterm_alone`): SIGTERM then ends the process at once, as SIGKILL does for the SDK."""
    try:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError, AttributeError) as exc:  # no SIGTERM here (Windows), or an embedding forbids it
        log.debug("inferensics: no SIGTERM handler (%s)", exc)


def _leave_sigterm_alone() -> None:
    """The active tracker's ``SdkConfig.sigterm_handler`` is off: set no SIGTERM handler, and put SIGTERM's default
    action back where an earlier tracker of the process set the SDK's (a handler set by anyone else stays)."""
    if not _REGISTRY.sigterm_hook:
        return
    try:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _REGISTRY.sigterm_hook = False  # a later tracker with the setting on sets it again
    except (ValueError, OSError, AttributeError) as exc:
        log.debug("inferensics: SIGTERM handler not removed (%s)", exc)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM ends the process at once. The shutdown runs on a thread of its own: the signal may have
    # come while the main thread held a lock the shutdown takes (its own flush), and it must not wait for itself.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    worker = threading.Thread(
        target=_shutdown_at_exit, kwargs={"killed": True}, name="inferensics-sigterm", daemon=True
    )
    worker.start()
    worker.join(SIGTERM_SHUTDOWN_S)
    os.kill(os.getpid(), signal.SIGTERM)  # the default action now: the process ends as SIGTERM ends it
