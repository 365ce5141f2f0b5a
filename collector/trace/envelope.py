"""The TORCH_TRACE envelope: one structured compile-trace record, whatever transport carried it.

PyTorch's ``trace_structured`` emits ``{<kind>: <body>, frame_id, frame_compile_id, attempt, ...}`` plus an
optional string payload. In-process the host SDK receives that dict as ``LogRecord.metadata`` and the
payload as ``LogRecord.payload``; in a ``TORCH_TRACE`` file each record is a glog-prefixed JSON line with
the payload on TAB-indented lines after it. :func:`decode_record` turns the dict form into an
:class:`Envelope`; :func:`iter_file_envelopes` turns a file's lines into envelopes, reporting damaged
lines as :class:`Damaged` instead of raising. This module imports only the standard library, so the live
sink on a bare GPU host can use it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

RESERVED: Final = frozenset(
    {
        "rank",
        "compiled_autograd_id",
        "frame_id",
        "frame_compile_id",
        "attempt",
        "severity",
        "timestamp",
        "pathname",
        "thread",
        "subgraph_name",
        "has_payload",
        "stack",
    }
)
"""Envelope keys that describe the record rather than name its kind."""

_GLOG: Final = re.compile(r"^([VIWEC])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{1,6})\s+(\d+) ([^\]]*)\] (.*)$")


@dataclass(frozen=True, slots=True)
class Envelope:
    """One structured trace record.

    Attributes:
        kind: The record's name (``compilation_metrics``, ``artifact``, ``dynamo_start``...).
        body: The value under ``kind`` (a dict for most kinds).
        frame_id: Dynamo frame id, ``None`` outside a compile.
        frame_compile_id: Recompile counter of the frame, ``None`` outside a compile.
        attempt: Restart attempt of the analysis.
        compiled_autograd_id: Compiled-autograd id, ``None`` for ordinary frames.
        rank: Distributed rank when the log carries one.
        payload: The payload text, ``None`` when the record has none.
        payload_ok: ``False`` when the payload does not match the envelope's ``has_payload`` digest.
        ts: Wall-clock time of the record when the transport knows it.
        lineno: First line of the record in its file (0 in-process).
        pid: Id of the process that wrote the record, from a file's glog prefix (``None`` in-process).
        stamp: The glog prefix's time as written, ``MMDD HH:MM:SS.ffffff`` (the writing machine's local time,
            no year; ``""`` in-process).
    """

    kind: str
    body: Any
    frame_id: int | None = None
    frame_compile_id: int | None = None
    attempt: int = 0
    compiled_autograd_id: int | None = None
    rank: int | None = None
    payload: str | None = None
    payload_ok: bool = True
    ts: datetime | None = None
    lineno: int = 0
    pid: int | None = None
    stamp: str = ""

    @property
    def compile_id(self) -> str:
        """Dynamo's compile id (``0/1``, ``!0/1/2``), or ``""`` outside a compile."""
        if self.frame_id is None or self.frame_compile_id is None:
            return ""
        base = f"{self.frame_id}/{self.frame_compile_id}"
        return f"!{self.compiled_autograd_id}/{base}" if self.compiled_autograd_id is not None else base

    @property
    def artifact_name(self) -> str:
        """For ``artifact`` records the artifact's name, else ``""``."""
        if self.kind == "artifact" and isinstance(self.body, Mapping):
            return str(self.body.get("name", ""))
        return ""

    @property
    def name(self) -> str:
        """The artifact name for artifacts, else the kind: the key most consumers dispatch on."""
        return self.artifact_name or self.kind

    def payload_json(self) -> Any:
        """The payload parsed as JSON.

        Raises:
            ValueError: the payload is missing, damaged or not JSON.
        """
        if self.payload is None or not self.payload_ok:
            raise ValueError("payload missing or damaged")
        return json.loads(self.payload)


@dataclass(frozen=True, slots=True)
class Damaged:
    """A line of a trace file that could not be decoded; importers count and skip it."""

    lineno: int
    reason: str
    stamp: str = ""
    """The glog stamp of a record whose header was read before the record was refused (one that names no kind):
    it dates the records after it as a sound record's does (``""``: none was read)."""


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def decode_record(
    metadata: Mapping[str, Any],
    payload: str | None,
    *,
    ts: datetime | None = None,
    lineno: int = 0,
    pid: int | None = None,
    stamp: str = "",
) -> Envelope:
    """Build an :class:`Envelope` from the dict ``trace_structured`` emits (shared by file and live sinks).

    Raises:
        ValueError: the dict names no record kind.
    """
    kind = next((k for k in metadata if k not in RESERVED), None)
    if kind is None:
        raise ValueError("record names no kind")
    expected = metadata.get("has_payload")
    ok = True
    if isinstance(expected, str) and payload is not None:
        # surrogatepass: a payload torch could not have hashed (a lone surrogate, from a live record) reads
        # as damaged rather than raising
        data = payload.encode("utf-8", "surrogatepass")
        ok = hashlib.md5(data, usedforsecurity=False).hexdigest() == expected
    elif isinstance(expected, str) and payload is None:
        ok = False
    attempt = _opt_int(metadata.get("attempt"))
    return Envelope(
        kind=kind,
        body=metadata[kind],
        frame_id=_opt_int(metadata.get("frame_id")),
        frame_compile_id=_opt_int(metadata.get("frame_compile_id")),
        attempt=attempt if attempt is not None else 0,
        compiled_autograd_id=_opt_int(metadata.get("compiled_autograd_id")),
        rank=_opt_int(metadata.get("rank")),
        payload=payload,
        payload_ok=ok,
        ts=ts,
        lineno=lineno,
        pid=pid,
        stamp=stamp,
    )


def is_record_header(line: str) -> bool:
    """Whether ``line`` reads as a TORCH_TRACE record: a glog prefix followed by a JSON object."""
    m = _GLOG.match(line.rstrip("\r\n"))
    return m is not None and m.group(10).lstrip().startswith("{")


def stamp_time(stamp: str, year: int) -> datetime | None:
    """The local time a glog stamp (``MMDD HH:MM:SS.ffffff``, :attr:`Envelope.stamp`) names in ``year``, naive;
    ``None`` when that year has no such day (29 February) or the stamp is no date."""
    try:  # fixed positions: strptime costs ten times more, once a record
        month, day, hour, minute, second = (int(stamp[i : i + 2]) for i in (0, 2, 5, 8, 11))
        return datetime(year, month, day, hour, minute, second, int(stamp[14:20]))
    except ValueError:
        return None


_QUARTER_HOUR: Final = 900
_MAX_UTC_OFFSET: Final = timedelta(hours=14)
_EARLIEST_EPOCH: Final = 946_684_800.0
"""2000-01-01 UTC: an epoch time before it is no wall-clock time torch wrote."""
_LATEST_EPOCH: Final = 4_102_444_800.0
"""2100-01-01 UTC."""


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def record_epoch(env: Envelope) -> float | None:
    """When torch wrote the record, in seconds since the epoch (UTC), if the record says; else ``None``.

    A ``chromium_event``'s payload carries ``ts`` (microseconds), taken as the event is logged; a
    ``compilation_metrics`` record is logged as its compile ends: ``end_time_us``, else ``start_time`` (seconds)
    or ``start_time_us`` plus ``entire_frame_compile_time_s``. A glog stamp is the same instant in the writing
    machine's local time, so such records date a log's stamps (:func:`stamp_clock`).
    """
    seconds: float | None = None
    if env.kind == "chromium_event" and env.payload_ok:
        try:
            body = env.payload_json()
        except ValueError:
            return None
        us = _seconds(body.get("ts")) if isinstance(body, dict) else None
        seconds = us / 1e6 if us is not None else None
    elif env.kind == "compilation_metrics" and isinstance(env.body, Mapping):
        end_us = _seconds(env.body.get("end_time_us"))
        start = _seconds(env.body.get("start_time"))
        start_us = _seconds(env.body.get("start_time_us"))
        took = _seconds(env.body.get("entire_frame_compile_time_s")) or 0.0
        if end_us is not None:
            seconds = end_us / 1e6
        elif start is not None:
            seconds = start + took
        elif start_us is not None:
            seconds = start_us / 1e6 + took
    if seconds is None or not _EARLIEST_EPOCH <= seconds < _LATEST_EPOCH:
        return None
    return seconds


def stamp_clock(stamp: str, epoch: float) -> tuple[int, timedelta] | None:
    """The year of a glog ``stamp`` and the writing machine's UTC offset (local minus UTC, to 15 minutes) that
    make it the instant ``epoch`` (:func:`record_epoch`); ``None`` when no year and offset of ±14 hours do."""
    utc = datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)
    best: tuple[int, timedelta] | None = None
    for year in (utc.year - 1, utc.year, utc.year + 1):  # a stamp on one side of New Year, UTC on the other
        local = stamp_time(stamp, year)
        if local is not None and (best is None or abs(local - utc) < abs(best[1])):
            best = (year, local - utc)
    if best is None:
        return None
    offset = timedelta(seconds=round(best[1].total_seconds() / _QUARTER_HOUR) * _QUARTER_HOUR)
    return (best[0], offset) if abs(offset) <= _MAX_UTC_OFFSET else None


_NEW_YEAR_BACK: Final = timedelta(days=1)
"""A stamp this far before the previous record's is in the next year (a log across New Year); less is a
record written out of order, or a clock put back (daylight saving time's end)."""


class GlogStamps:
    """Turns a file's glog stamps, in order, into UTC times: the first in ``year``, the next year from the first
    stamp that falls a day or more before its predecessor, each shifted by the writing machine's UTC offset
    (``utc_offset``, which a reader may change between stamps: a log across a daylight-saving change)."""

    def __init__(self, year: int, utc_offset: timedelta) -> None:
        self.year, self.utc_offset = year, utc_offset
        self.previous: datetime | None = None

    def utc(self, stamp: str) -> datetime | None:
        """The UTC time of the next stamp (``None``: it names no day of its year)."""
        local = stamp_time(stamp, self.year)
        if self.previous is not None and (local is None or local < self.previous - _NEW_YEAR_BACK):
            later = stamp_time(stamp, self.year + 1)
            if later is not None and later >= self.previous - _NEW_YEAR_BACK:
                self.year, local = self.year + 1, later
        if local is None:
            return None
        self.previous = local
        return (local - self.utc_offset).replace(tzinfo=UTC)


def _stamp(m: re.Match[str]) -> str:
    return f"{m.group(2)}{m.group(3)} {m.group(4)}:{m.group(5)}:{m.group(6)}.{m.group(7).ljust(6, '0')}"


def _decode_header(lineno: int, line: str, payload: list[str] | None, stamps: GlogStamps) -> Envelope | Damaged:
    m = _GLOG.match(line)
    if m is None:
        return Damaged(lineno, "not a glog-prefixed record")
    try:
        metadata = json.loads(m.group(10))
    except ValueError as exc:
        return Damaged(lineno, f"envelope is not JSON: {exc}")
    if not isinstance(metadata, dict):
        return Damaged(lineno, "envelope is not a JSON object")
    stamp = _stamp(m)
    ts = stamps.utc(stamp)
    try:
        text = "\n".join(payload) if payload is not None else None
        return decode_record(metadata, text, ts=ts, lineno=lineno, pid=int(m.group(8)), stamp=stamp)
    except ValueError as exc:
        return Damaged(lineno, str(exc), stamp)


def iter_file_envelopes(
    lines: Iterable[str], *, year: int | None = None, utc_offset: timedelta = timedelta(0)
) -> Iterator[Envelope | Damaged]:
    """Decode the lines of a TORCH_TRACE file; never raises on content.

    Args:
        lines: The file's lines (with or without trailing newlines).
        year: Year of the first record's glog stamp, which carries none (default: the current year); a stamp a
            day or more before its predecessor's starts the next year.
        utc_offset: The writing machine's local time minus UTC: glog stamps are local time.

    Yields:
        One :class:`Envelope` per record, or one :class:`Damaged` per undecodable header or stray line.
    """
    stamps = GlogStamps(year if year is not None else datetime.now(UTC).year, utc_offset)
    header: tuple[int, str] | None = None
    payload: list[str] | None = None
    for lineno, raw in enumerate(lines, start=1):
        # Only the line's own newline: PyTorch splits payloads on "\n" alone, so a "\r" is payload text.
        line = raw[:-1] if raw.endswith("\n") else raw
        if line.startswith("\t"):
            if header is None:
                yield Damaged(lineno, "payload line without a record")
                continue
            if payload is None:
                payload = []
            payload.append(line[1:])
            continue
        if header is not None:
            yield _decode_header(header[0], header[1], payload, stamps)
            header, payload = None, None
        if not line.strip():
            continue
        header = (lineno, line)
    if header is not None:
        yield _decode_header(header[0], header[1], payload, stamps)
