"""A log's clock: how a TORCH_TRACE log's glog stamps (the writing machine's local time, without a year) become
UTC times, found in the one pass that decodes the log.

Records that carry an epoch time (:func:`~inferensics.collector.trace.envelope.record_epoch`) say both. The
year is the one most of the first ``_CLOCK_EPOCHS`` of them give; the UTC offset is taken afresh from each of
them, so a log that runs across a daylight-saving change is dated right on both sides of it (the records
between the change and the next record with an epoch time keep the offset before it: nothing in them says
when the clock moved). Records are held back until the year is known (the first ``_CLOCK_EPOCHS`` records with
an epoch time, the end of the log, or ``_HELD_CHARS`` of payload, whichever comes first), then pass on dated.
A log without epoch times has its year inferred from the file's mtime and its stamps read as UTC.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from inferensics.collector.trace.envelope import (
    Damaged,
    Envelope,
    GlogStamps,
    iter_file_envelopes,
    record_epoch,
    stamp_clock,
    stamp_time,
)

_PROVISIONAL_YEAR = 2000
"""Year the stamps are first read in, before the log says theirs: a leap year, so a 29 February stamp reads."""
_CLOCK_EPOCHS = 8
"""Records with an epoch time whose years are voted on."""
_HELD_CHARS = 64 << 20
"""Payload text held back while the year is unknown: past it the year is decided from the records read, so a
long log without epoch times is not held in memory whole."""

Item = Envelope | Damaged


@dataclass(frozen=True, slots=True)
class LogClock:
    """How a log's glog stamps (the writing machine's local time, without a year) became UTC times."""

    year: int
    """Year of the first record's stamp (a later stamp a day or more before its predecessor's is a year on)."""
    utc_offset: timedelta
    """The writing machine's local time minus UTC, to 15 minutes, at the log's first records (those up to the first
    record with an epoch time take that record's)."""
    epochs: int
    """Records with an epoch time, among the first ``_CLOCK_EPOCHS``, that gave this year. 0: none was read before
    the year was decided; the year is then inferred (the latest that puts the first record no later than the
    file's mtime) and the stamps are read as UTC until a record with an epoch time says otherwise."""
    shifts: tuple[tuple[datetime, timedelta], ...] = ()
    """Later changes of the UTC offset (daylight saving time), in order: the UTC time of the first record whose
    epoch time gave the new offset, and that offset. Records from it on are dated with it."""

    @property
    def inferred(self) -> bool:
        """The log held no epoch time before its year was decided: its times were inferred (see :attr:`epochs`)."""
        return self.epochs == 0


class LogDater:
    """Decodes one log's lines and dates its records, reading the lines once (see the module).

    ``clock`` is set once :meth:`envelopes` is exhausted.
    """

    def __init__(self, mtime: datetime) -> None:
        self._mtime = mtime
        self._held: list[tuple[Item, timedelta | None]] = []
        self._held_chars = 0
        self._votes: Counter[int] = Counter()
        self._first: Envelope | None = None
        self._stamps: GlogStamps | None = None
        self._shifts: list[tuple[datetime, timedelta]] = []
        self._year = (0, 0)  # the year, and the votes that gave it
        self._initial_offset = timedelta(0)
        self.clock: LogClock | None = None

    def envelopes(self, lines: Iterable[str]) -> Iterator[Item]:
        """The log's records in order, each :class:`Envelope` with its UTC ``ts``; damaged lines as they come."""
        for item in iter_file_envelopes(lines, year=_PROVISIONAL_YEAR):
            offset = self._epoch_offset(item)
            if self._stamps is not None:
                yield self._dated(item, offset)
                continue
            self._held.append((item, offset))
            self._held_chars += len(item.payload or "") if isinstance(item, Envelope) else 0
            if self._votes.total() == _CLOCK_EPOCHS or self._held_chars >= _HELD_CHARS:
                yield from self._release()
        if self._stamps is None:
            yield from self._release()
        (year, epochs), shifts = self._year, tuple(self._shifts)
        self.clock = LogClock(year=year, utc_offset=self._initial_offset, epochs=epochs, shifts=shifts)

    def _epoch_offset(self, item: Item) -> timedelta | None:
        """The UTC offset the record's epoch time gives its stamp (``None``: it holds none); a vote for the year
        while that is undecided."""
        if isinstance(item, Damaged) or item.ts is None:
            return None
        self._first = self._first or item
        epoch = record_epoch(item)
        dated = stamp_clock(item.stamp, epoch) if epoch is not None else None
        if dated is None:
            return None
        if self._stamps is None:
            # the first record's year: this record's, less the New Years the log crossed before it
            self._votes[dated[0] - (item.ts.year - _PROVISIONAL_YEAR)] += 1
        return dated[1]

    def _release(self) -> Iterator[Item]:
        """Decide the year and the first offset, then date the records held back."""
        if self._votes:
            self._year = self._votes.most_common(1)[0]
        else:
            self._year = (mtime_year(self._first.stamp, self._mtime) if self._first else self._mtime.year, 0)
        self._initial_offset = next((o for _, o in self._held if o is not None), timedelta(0))
        self._stamps = GlogStamps(self._year[0], self._initial_offset)
        held, self._held = self._held, []
        for item, offset in held:
            yield self._dated(item, offset)

    def _dated(self, item: Item, offset: timedelta | None) -> Item:
        stamps = self._stamps
        assert stamps is not None
        moved = offset is not None and offset != stamps.utc_offset
        if offset is not None:
            stamps.utc_offset = offset
        if isinstance(item, Damaged):
            if item.stamp:
                stamps.utc(item.stamp)  # its stamp counts towards the next New Year, as a sound record's
            return item
        ts = stamps.utc(item.stamp)
        if moved and ts is not None:
            self._shifts.append((ts, stamps.utc_offset))
        return replace(item, ts=ts)


def mtime_year(stamp: str, mtime: datetime) -> int:
    """The latest year that puts a glog stamp, read as UTC, no later than the file's mtime."""
    for year in range(mtime.year, mtime.year - 8, -1):  # 29 February: back to a leap year
        local = stamp_time(stamp, year)
        if local is not None and local.replace(tzinfo=UTC) <= mtime:
            return year
    return mtime.year
