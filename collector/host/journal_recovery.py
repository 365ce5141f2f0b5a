"""Reading the journals of dead serving processes back into request rows (see :mod:`.journal`).

Each request a dead process left in flight becomes an ``error`` row under the dead process's own labels
(host, model, pool, traffic class, bundle: the journal holds only the request's id). The row names how the
process died (the fatal error ``faulthandler`` wrote, or none: killed) and the generated module, line and
kernel the crashed thread was in: a module Inductor wrote is named by its sha256, the artifact id its compile
record carries, so the request page shows that graph's kernels and source lines. Its time is the time of
death (the report's file time), else the background thread's last wake: when the request started is not
journaled, so its latency is unknown (0).

Besides, where the dead process's exporter reported its deliveries, the requests it finished whose rows it had not
delivered (still queued, buffered or held for export when it died, or dropped): ``Recovered.lost``, the requests it
began less those in flight, plus the rows it had itself recovered and delivered, less the request rows delivered.

A journal with rows is not removed when read: the recovering tracker holds it (:class:`DeadJournal`, locked, so no
other tracker reads it meanwhile) until its exporter settles every row (:mod:`.delivery`). A delivered row's slot is
cleared in the file (and counted delivered in its header, so that what the death lost still reads the same); once all
are delivered the files go. A row not delivered (the service down until the exporter stopped, a refusal, a full
queue), or a recovering process that dies in turn, leaves the journal with the rows still undelivered for the next
tracker. Reading it sets its delivered count so that its loss reads 0 afterwards: counted once, by the first reader.

A row the destination refuses for good (:class:`~.delivery.Outcome`: not encodable, not writable, a 400) is settled
as done: cleared like a delivered one and counted (``DeadJournal.rejected``), never exported again. The retries are
bounded: each reader counts itself in the journal's header (``recoveries``), and a journal read
:data:`MAX_RECOVERIES` times already, or whose process died more than :data:`GIVE_UP_AFTER_S` ago, is given up:
removed, its rows counted in ``Recovered.given_up`` instead of exported.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from inferensics.collector.host.delivery import Outcome
from inferensics.collector.host.journal import (
    DELIVERED_AT,
    DELIVERIES,
    GRAPHS_SUFFIX,
    HEADER_BYTES,
    HEARTBEAT_AT,
    ID_BYTES,
    RECOVERED_AT,
    RING_END,
    SLOT_BYTES,
    SLOTS,
    STACKS_SUFFIX,
    SUFFIX,
)
from inferensics.schema.events import RequestEvent

log = logging.getLogger("inferensics.collector.host")

ERROR_LIMIT = 4000
"""Characters of a recovered row's error text: the first line, then the crashed thread's stack."""
DIED_ATTR = "died"
"""Attribute of a recovered row: the fatal error the process reported, or ``no report``."""

_FATAL = re.compile(r"^Fatal Python error: (.+)$", re.M)
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):$")
_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.+)$')
_GENERATED = re.compile(r"^c[a-z0-9]{40,}\.py$")
"""Inductor's generated modules are named ``c<code hash>.py``."""
_CALLEE = re.compile(r"^\s*(?:[\w, ]+=\s*)?([A-Za-z_][\w.]*)\(")


@dataclass
class FatalReport:
    """What ``faulthandler`` wrote when the process died."""

    error: str = ""
    current_thread: int | None = None
    stacks: dict[int, list[tuple[str, int, str]]] = field(default_factory=dict)
    text: dict[int, str] = field(default_factory=dict)


@dataclass
class Recovered:
    """The rows of one dead process's journal and what was read."""

    rows: list[RequestEvent]
    process: str
    died: str
    lost: int | None = None
    """Requests it finished whose rows it had not delivered; ``None``: unknown (its exporter reported no
    deliveries)."""
    slots: list[int] = field(default_factory=list)
    """Each row's slot in the journal (its offset)."""
    journal: DeadJournal | None = None
    """The journal, held until its rows are settled (None once removed: it had no rows, or was given up)."""
    recoveries: int = 0
    """Trackers that read it before this one."""
    given_up: list[str] = field(default_factory=list)
    """The ids of the rows still undelivered in a journal given up (read :data:`MAX_RECOVERIES` times already, or
    older than :data:`GIVE_UP_AFTER_S`): removed, not exported (``rows`` is then empty)."""
    since: float = 0.0
    """When it died (the time of its rows)."""
    why_given_up: str = ""


class DeadJournal:
    """A dead process's journal whose rows this process exports: held (its lock, an open descriptor) until each row
    is settled (:meth:`settled`); removed once all were delivered, else released with the undelivered rows in it for
    the next tracker. Thread-safe (the exporter's thread settles, the tracker's shutdown releases)."""

    def __init__(self, path: Path, fd: int, rows: int, delivered: int | None) -> None:
        self.path = path
        self.pending = rows
        self.undelivered = 0
        self.rejected = 0
        self._fd: int | None = fd
        self._delivered = delivered  # the header's delivered count; None: the dead process reported none
        self._lock = threading.Lock()

    def settled(self, slot: int, outcome: Outcome) -> None:
        """The row of ``slot`` was delivered, or refused for good (its slot is cleared and counted delivered in the
        file: done), or not delivered this time (it stays)."""
        with self._lock:
            fd = self._fd
            if fd is None:  # released (a fork): the row stays in the file
                return
            try:
                if outcome.delivered or outcome.refused:
                    if outcome.refused:
                        self.rejected += 1
                    if self._delivered is not None:  # first: a death in between reads one fewer lost, never more
                        self._delivered += 1
                        os.pwrite(fd, struct.pack("<Q", self._delivered), DELIVERED_AT)
                    os.pwrite(fd, b"\0", slot)
                else:
                    self.undelivered += 1
            except OSError as exc:
                log.warning("inferensics: crash journal %s not updated (%s); its rows may be exported again", self.path,
                            exc)  # fmt: skip
            self.pending -= 1
            if self.pending <= 0:
                if not self.undelivered:
                    _remove(self.path)
                self._close()

    def discard(self) -> None:
        """Remove the files now (its rows' delivery cannot be told: an exporter without a delivery watch)."""
        with self._lock:
            _remove(self.path)
            self._close()

    def release(self) -> int:
        """Let go of the journal (the tracker stops), leaving its unsettled rows in it; how many there were."""
        with self._lock:
            if self._fd is None:
                return 0
            self._close()
            return self.pending

    def forget_in_child(self) -> None:
        """After ``fork``, in the child: close the inherited descriptor (the lock stays the parent's)."""
        self._close()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def parse_fatal_report(text: str) -> FatalReport:
    """The fatal error, the crashed thread and each thread's frames (most recent first) of a report."""
    report = FatalReport()
    fatal = _FATAL.search(text)
    report.error = fatal.group(1).strip() if fatal else ""
    thread: int | None = None
    lines: list[str] = []
    for line in text.splitlines():
        head = _THREAD.match(line)
        if head:
            thread = int(head.group(2), 16)
            if head.group(1) == "Current thread":
                report.current_thread = thread
            report.stacks[thread] = []
            lines = [line]
            report.text[thread] = line
            continue
        frame = _FRAME.match(line)
        if frame and thread is not None:
            report.stacks[thread].append((frame.group(1), int(frame.group(2)), frame.group(3)))
            lines.append(line)
            report.text[thread] = "\n".join(lines)
        elif thread is not None and not line.strip():
            thread = None
    return report


STALE_AFTER_S = 30 * 86400
"""A dead process's journal for another destination is left for a tracker exporting there, up to this age."""
MAX_RECOVERIES: Final = 10
"""Trackers that may read a dead process's journal and fail to deliver its rows; the next one gives it up."""
GIVE_UP_AFTER_S: Final = 7 * 86400
"""A dead process's rows that a tracker already failed to deliver are given up this long after it died (a first
reader always tries: a host that was off for longer still sends what its dead process left)."""
RECOVERIES: Final = "recoveries"
"""Header key: how many trackers read the journal (written by each reader)."""


def recover_dead(directory: Path, destination: str) -> list[Recovered]:
    """Read, and hold until its rows are delivered (``Recovered.journal``), every journal in ``directory`` whose
    process is gone and whose rows were bound for
    ``destination`` (the exporter's: a store's DSN, a service's URL): a recovered row goes where its own
    process would have sent it. Never raises for one bad journal: it is removed, logged once and skipped."""
    out: list[Recovered] = []
    try:
        paths = sorted(directory.glob(f"*{SUFFIX}"))
    except OSError:
        return out
    for path in paths:
        try:
            recovered = _recover_one(path, destination)
        except Exception as exc:
            log.warning("inferensics: crash journal %s unreadable (%s: %s); removed", path, type(exc).__name__, exc)
            _remove(path)
            continue
        if recovered is not None:
            out.append(recovered)
    return out


def _recover_one(path: Path, destination: str) -> Recovered | None:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:  # taken by another recovering tracker, or removed by its clean owner
        return None
    kept = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its process is alive
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False
        if not same:  # another tracker read and removed it between our open and our lock
            return None
        data = os.pread(fd, RING_END, 0)
        header: dict[str, Any] = json.loads(data[:RECOVERED_AT].split(b"\0", 1)[0] or b"{}")
        if header.get("destination", "") != destination:
            age = time.time() - os.fstat(fd).st_mtime
            if age > STALE_AFTER_S:
                log.warning("inferensics: crash journal %s (for %s) unclaimed for %d days; removed", path,
                            header.get("destination", ""), age // 86400)  # fmt: skip
                _remove(path)
            return None
        stem = path.name[: -len(SUFFIX)]
        stacks = _read_text(path.with_name(stem + STACKS_SUFFIX))
        graphs = _read_graphs(path.with_name(stem + GRAPHS_SUFFIX))
        died_at = _mtime(path.with_name(stem + STACKS_SUFFIX)) if stacks.strip() else None
        (last_beat,) = struct.unpack_from("<d", data, HEARTBEAT_AT)
        recovered = _rows(header, data, stacks, graphs=graphs, died_at=died_at, last_beat=last_beat)
        recovered.recoveries = recoveries = _count(header.get(RECOVERIES))
        head = json.dumps({**header, RECOVERIES: recoveries + 1}).encode()
        if recoveries >= MAX_RECOVERIES:
            _give_up(recovered, f"{recoveries} trackers could not deliver them")
        elif recoveries and time.time() - recovered.since > GIVE_UP_AFTER_S:  # a first reader always tries
            when = datetime.fromtimestamp(recovered.since, UTC).isoformat(timespec="seconds")
            _give_up(recovered, f"the process died at {when}, over {GIVE_UP_AFTER_S // 86400} days ago")
        elif len(head) >= RECOVERED_AT:  # this read cannot be counted: given up rather than retried without bound
            _give_up(recovered, "its journal's header has no room to count the trackers that read it")
        if not recovered.rows:
            _remove(path)
            return recovered
        os.pwrite(fd, head + b"\0", 0)
        delivered = None
        if header.get(DELIVERIES) is True:
            # its loss is counted now, by this reader: a later reader of what is left reads none
            (delivered,) = struct.unpack_from("<Q", data, DELIVERED_AT)
            delivered += recovered.lost or 0
            os.pwrite(fd, struct.pack("<Q", delivered), DELIVERED_AT)
        recovered.journal = DeadJournal(path, fd, len(recovered.rows), delivered)
        kept = True
        return recovered
    finally:
        if not kept:
            os.close(fd)


def _rows(
    header: dict[str, Any], data: bytes, stacks: str, *, graphs: dict[str, str], died_at: float | None,
    last_beat: float,
) -> Recovered:  # fmt: skip
    report = parse_fatal_report(stacks)
    in_flight = []
    slots = []
    begun = 0
    for index, slot in enumerate(range(HEADER_BYTES, len(data) - SLOT_BYTES + 1, SLOT_BYTES)):
        (lap,) = struct.unpack_from("<Q", data, slot + ID_BYTES)
        if lap:  # the request's ordinal in the process: the last one begun has the highest
            begun = max(begun, (lap - 1) * SLOTS + index + 1)
        if data[slot]:
            rid = data[slot : slot + ID_BYTES].rstrip(b"\0")
            in_flight.append(rid.decode("utf-8", errors="replace"))
            slots.append(slot)
    lost = None
    if header.get(DELIVERIES) is True:
        (recovered,) = struct.unpack_from("<Q", data, RECOVERED_AT)
        (delivered,) = struct.unpack_from("<Q", data, DELIVERED_AT)
        lost = max(begun - len(in_flight) + recovered - delivered, 0)
    died = report.error or "no report"
    when = died_at if died_at is not None else last_beat
    labels = {
        "host": str(header.get("host", "")),
        "model": str(header.get("model", "")),
        "hw_pool": str(header.get("hw_pool", "")),
        "traffic_class": str(header.get("traffic_class", "")),
        "bundle_id": str(header.get("bundle_id", "")),
    }
    attrs = {DIED_ATTR: died, "process": str(header.get("process", "")),
             "ts": "time of death" if died_at is not None else "last sign of life"}  # fmt: skip
    if len(in_flight) > 1:
        attrs["in_flight"] = str(len(in_flight))
    error, graph = _error(report, header, graphs, len(in_flight))
    if graph.get("kernel"):
        attrs["crash_kernel"] = graph["kernel"]
    artifact = graph.get("artifact", "")
    rows = [
        RequestEvent(
            request_id=rid,
            ts=datetime.fromtimestamp(when, UTC),
            **labels,
            latency_ms=0.0,
            status="error",
            error=error[:ERROR_LIMIT],
            outcome="error",
            guard_outcome="unknown",  # the guard counts were in the dead process's memory
            graph_keys=(graph.get("graph_key", ""),) if artifact else (),
            graph_artifacts=(artifact,) if artifact else (),
            graph_calls=(1,) if artifact else (),
            graph_us=(0,) if artifact else (),
            attrs=attrs,
        )
        for rid in in_flight
    ]
    return Recovered(rows, attrs["process"], died, lost, slots, since=when)


def _error(
    report: FatalReport, header: dict[str, Any], graphs: dict[str, str], in_flight: int
) -> tuple[str, dict[str, str]]:
    """The recovered rows' error text, and the graph and kernel the crashed thread was in (if any)."""
    others = f" (one of {in_flight} in flight when it died)" if in_flight > 1 else ""
    if not report.error:
        if header.get("stacks") == "elsewhere":
            return (
                f"process died while this request was in flight{others}; its fatal-error report, if any, went to "
                "the faulthandler output set up before the SDK (stderr unless redirected)",
                {},
            )
        return (
            f"process died while this request was in flight{others}, with no fatal-error report: killed by a "
            "signal (SIGKILL, SIGTERM: the out-of-memory killer, a supervisor) or ended by os._exit",
            {},
        )
    graph: dict[str, str] = {}
    detail = ""
    where = _in_generated(report.stacks.get(report.current_thread or -1, []))
    if where is not None:
        artifact, line_text, file, line = where
        kernel = _callee(line_text)
        graph = {"artifact": artifact, "graph_key": graphs.get(artifact, ""), "kernel": kernel}
        detail = f", in {f'kernel {kernel} of ' if kernel else ''}the generated module {file}:{line}"
    first = f"process died in this request{others}: Fatal Python error: {report.error}{detail}"
    native = "A native error's own message (a C++ exception's what()) went to the process's stderr."
    stack = report.text.get(report.current_thread or -1, "")
    return (f"{first}\n\n{native}\n\n{stack}" if stack else first), graph


def _in_generated(frames: list[tuple[str, int, str]]) -> tuple[str, str, str, int] | None:
    """The most recent frame in a module Inductor generated: (its sha256, the line's text, file, line)."""
    for file, line, _name in frames:
        if not _GENERATED.match(os.path.basename(file)):
            continue
        try:
            code = Path(file).read_bytes()
        except OSError:  # the compile cache was cleared since: the frame is still named
            return "", "", file, line
        lines = code.decode("utf-8", errors="replace").splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return hashlib.sha256(code).hexdigest(), text, file, line
    return None


def _callee(line_text: str) -> str:
    """The kernel a generated module's line calls (``triton_poi_fused_0.run(...)`` → ``triton_poi_fused_0``)."""
    match = _CALLEE.match(line_text)
    if not match:
        return ""
    name = match.group(1)
    return name.removesuffix(".run")


def _give_up(recovered: Recovered, why: str) -> None:
    recovered.given_up = [r.request_id for r in recovered.rows]
    recovered.rows, recovered.slots, recovered.why_given_up = [], [], why


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _read_graphs(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in _read_text(path).splitlines():
        artifact, _, key = line.partition(" ")
        if artifact and key:
            out[artifact] = key
    return out


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _remove(path: Path) -> None:
    stem = path.name[: -len(SUFFIX)]
    for p in (path, path.with_name(stem + STACKS_SUFFIX), path.with_name(stem + GRAPHS_SUFFIX)):
        with contextlib.suppress(OSError):
            p.unlink()
