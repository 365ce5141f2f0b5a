"""The crash journal: which requests a serving process was running when it died.

A process that dies inside a request (a kernel's ``std::terminate``, a segfault, the out-of-memory killer)
takes the request's record with it: the record is built after the request ends. Each tracker keeps a small
memory-mapped file in :func:`journal_dir`. Entering a request writes its id into a slot of a ring, and
leaving it marks the slot free: two writes into shared memory, no system call. The pages belong to the
file, so the kernel keeps what was written however the process ends. Python's ``faulthandler`` (when nothing
else enabled it) writes the fatal error and every thread's stack beside it; the SDK's background thread
stamps the time on every wake, the last sign of life of a process killed without a report.

Only the id is written on the serving path: between two model runs each Python operation there is cold,
and formatting the request's labels, start time and thread cost a small CPU model's request 1-2 % more
(benchmarks/results/sdk-cpu/README.md, session 27). A recovered row has the process's own labels.

The journal also tells what a death lost besides: each slot carries the lap of the ring it was written in (by
the same C call as the id; the lap changes once every :data:`SLOTS` requests), so the requests begun are known, and
the requests in flight among them; an exporter
that reports its deliveries (``on_requests_delivered``: the store exporter, the OTLP exporter) has the request rows
it delivered counted in the header, off the serving path. Finished less delivered is what was still queued,
buffered or held for export when the process died.

The next tracker started on the host reads the journals whose owner is gone (:mod:`.journal_recovery`),
exports each request left in flight as an ``error`` row and counts the finished requests whose rows were lost
(``stats()['requests_lost']``, one log line); it removes the dead journal once those rows were delivered, and leaves
the ones it could not deliver in it for the next tracker. A clean shutdown removes the process's own files. The owner
holds an advisory lock on its journal for as long as it lives: the kernel releases it when the process ends, which is
how a reader tells a dead process from a live one (a pid can be reused).
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import mmap
import os
import struct
import time
from pathlib import Path
from typing import IO, Any, Final

JOURNAL_DIR_ENV: Final = "INFERENSICS_JOURNAL_DIR"
"""Environment variable: the crash journals' folder (default ``$XDG_STATE_HOME/inferensics/journal``, else
``~/.local/state/inferensics/journal``); ``off`` turns the journal off."""
OFF: Final = "off"

SLOTS: Final = 256
"""Requests in flight the ring holds at once; a slot is reused after this many newer requests began."""
SLOT_BYTES: Final = 256
"""A slot: the request id's UTF-8 bytes, cut to :data:`ID_BYTES` or padded with NUL bytes, then the lap of the ring
it was written in (from 1, little-endian u64: the request's ordinal in the process is ``(lap - 1) * SLOTS + its
slot's index + 1``); a first byte of 0 marks it free (a request's end clears that byte alone). An id that starts with
a NUL character is not journaled."""
ID_BYTES: Final = SLOT_BYTES - 8
write_slot: Final = struct.Struct(f"<{ID_BYTES}sQ").pack_into
"""``write_slot(buffer, offset, id_bytes, lap)``: one C call writes the id, pads it and writes the lap (the request
scope inlines :meth:`Journal.begin`; two slice writes, the id and a length byte, cost it about a microsecond more
between two model runs, ``benchmarks/results/sdk-cpu/README.md``). The lap rather than a per-request counter: the
counter's arithmetic cost the entry several times more."""
HEADER_BYTES: Final = 4096
"""The header: the process's labels as JSON, then, in its last 24 bytes, the request rows recovered from dead
processes' journals and delivered (u64; queued, where the exporter cannot tell), the request rows its exporter
delivered (u64, recovered ones included) and
the background thread's last wake (f64)."""
RECOVERED_AT: Final = HEADER_BYTES - 24
DELIVERED_AT: Final = HEADER_BYTES - 16
HEARTBEAT_AT: Final = HEADER_BYTES - 8
DELIVERIES: Final = "deliveries"
"""Header key: true where the process's exporter reported its deliveries (else what a death lost is unknown)."""
RING_END: Final = HEADER_BYTES + SLOTS * SLOT_BYTES
LAST_SLOT: Final = RING_END - SLOT_BYTES
SUFFIX: Final = ".journal"
STACKS_SUFFIX: Final = ".stacks"
GRAPHS_SUFFIX: Final = ".graphs"

try:
    import fcntl
except ImportError:  # not on Windows: no lock, so no journal
    fcntl = None  # type: ignore[assignment]


def journal_dir(setting: str | None = None) -> Path | None:
    """The journals' folder: ``setting`` (SdkConfig.journal_dir), else ``$INFERENSICS_JOURNAL_DIR``, else
    ``$XDG_STATE_HOME/inferensics/journal``, else ``~/.local/state/inferensics/journal``; None when off."""
    value = setting if setting is not None else os.environ.get(JOURNAL_DIR_ENV)
    if value is not None:
        return None if value.strip().lower() in ("", OFF) else Path(value).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "inferensics" / "journal"


class Journal:
    """One process's journal: the mapped ring the request scope writes (``view``, ``next_slot``) and
    its files.

    Raises ``OSError`` when the folder or file cannot be made: the tracker runs on without a journal and
    says why in its capability report.
    """

    def __init__(self, directory: Path, header: dict[str, Any]) -> None:
        if fcntl is None:
            raise OSError("no advisory file locks on this platform (fcntl)")
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.header = header
        self.faulthandler_ours = False
        self._stacks: IO[bytes] | None = None
        self._graphs: IO[str] | None = None
        self._open()

    def _open(self) -> None:
        stem = f"{os.getpid()}-{os.urandom(4).hex()}"
        self.path = self.directory / f"{stem}{SUFFIX}"
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, RING_END)
            self.mm = mmap.mmap(fd, RING_END)
        except BaseException:
            os.close(fd)
            self.path.unlink(missing_ok=True)
            raise
        self._fd = fd  # kept open: closing it would release the lock
        self.stacks_path = self.directory / f"{stem}{STACKS_SUFFIX}"
        self.graphs_path = self.directory / f"{stem}{GRAPHS_SUFFIX}"
        self._graphs = None
        if not faulthandler.is_enabled() or self.faulthandler_ours:
            # The process's fatal-error report (its signal and every thread's stack) goes beside the ring.
            # A handler someone else enabled (PYTHONFAULTHANDLER, pytest) is left alone: its report goes where
            # they sent it, and the recovered rows say so.
            self._stacks = open(self.stacks_path, "wb")  # noqa: SIM115 - open for the process's life
            faulthandler.enable(self._stacks, all_threads=True)
            self.faulthandler_ours = True
        self.header["stacks"] = "ours" if self.faulthandler_ours else "elsewhere"
        head = json.dumps({**self.header, "pid": os.getpid()}).encode()[: RECOVERED_AT - 1]
        self.mm[: len(head)] = head
        # The request scope writes through the memoryview (the cheapest write from Python) and takes the next
        # slot without a lock: two threads entering at once may share one, and a request can go unjournaled (and
        # one finished request uncounted).
        self.view = memoryview(self.mm)
        self.next_slot = HEADER_BYTES
        self.lap = 0  # laps of the ring begun: the request that takes its first slot starts the next one
        self.delivered_rows = 0
        self.recovered_rows = 0
        self.beat()

    def begin(self, request_id: bytes) -> int:
        """Journal one request in flight and return its slot (the request scope inlines this)."""
        slot = self.next_slot
        self.next_slot = slot + SLOT_BYTES if slot < LAST_SLOT else HEADER_BYTES
        if slot == HEADER_BYTES:
            self.lap += 1
        write_slot(self.view, slot, request_id, self.lap)
        return slot

    @property
    def begun(self) -> int:
        """Requests journaled so far, as a reader of the file counts them."""
        if not self.lap:
            return 0
        in_lap = (self.next_slot - HEADER_BYTES) // SLOT_BYTES or SLOTS  # a lap just completed: next_slot is back
        return (self.lap - 1) * SLOTS + in_lap

    def delivered(self, rows: int) -> None:
        """The exporter delivered ``rows`` more request rows (its own thread, or the SDK's). Never raises: after a
        shutdown the mapping is closed, and nothing is lost any more."""
        self.delivered_rows += rows
        with contextlib.suppress(ValueError, TypeError, struct.error):
            struct.pack_into("<Q", self.mm, DELIVERED_AT, self.delivered_rows)

    def note_recovered(self, rows: int) -> None:
        """``rows`` more request rows of dead processes were delivered by this process's exporter (with an exporter
        that cannot tell which rows it delivered: queued)."""
        self.recovered_rows += rows
        struct.pack_into("<Q", self.mm, RECOVERED_AT, self.recovered_rows)

    def end(self, slot: int) -> None:
        """The request of ``slot`` ended (the request scope inlines this)."""
        self.view[slot] = 0

    def beat(self) -> None:
        """Stamp the time: the last sign of life of a process that dies without a report."""
        struct.pack_into("<d", self.mm, HEARTBEAT_AT, time.time())

    def note_graph(self, artifact_id: str, graph_key: str) -> None:
        """Remember which graph key a generated module (by its sha256, the artifact id) belongs to: a stack
        that names the module's file then names its graph. Background thread, once per compile."""
        if self._graphs is None:
            self._graphs = open(self.graphs_path, "a", encoding="utf-8")  # noqa: SIM115 - kept for appends
        self._graphs.write(f"{artifact_id} {graph_key}\n")
        self._graphs.flush()

    def forget_in_child(self) -> None:
        """After ``fork``, in the child: let go of the parent's journal without touching it.

        The child shares the parent's mapping (its writes would land in the parent's ring) and its open file (the
        lock lasts until every copy is closed, so a child outliving the parent would keep the parent's journal
        from being read). The tracker's background thread does not survive a fork either: a child serves
        unrecorded, as before, until it makes its own tracker.
        """
        self._release()

    def close(self) -> None:
        """A clean end: nothing was lost, so the files go."""
        self._release()
        for path in (self.path, self.stacks_path, self.graphs_path):
            path.unlink(missing_ok=True)

    def _release(self) -> None:
        """Disable our fatal-error report (a child's must not land in the parent's) and close every handle."""
        if self.faulthandler_ours:
            faulthandler.disable()
            self.faulthandler_ours = False
        for handle in (self._stacks, self._graphs):
            if handle is not None:
                with contextlib.suppress(OSError):
                    handle.close()
        with contextlib.suppress(Exception):
            self.view.release()
            self.mm.close()
        with contextlib.suppress(OSError):
            os.close(self._fd)
