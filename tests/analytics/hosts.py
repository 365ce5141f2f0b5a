"""Host SDK health records of a small fleet, relative to a clock ``now`` that the tests use as the range end.

Each process reports on its own cadence (records ``HALF`` before a whole minute, so none falls on a range
edge); the comments say what each one is there to show. The tests state their expectations as numbers.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from inferensics.schema.events import SdkHealthEvent

MIN: Final = timedelta(minutes=1)
HALF: Final = timedelta(seconds=30)
RANGE: Final = timedelta(hours=1)
"""The range the tests ask for: the hour before ``now``."""

OK = ("h-ok", "llama", "a100")
"""Healthy, reporting every minute for 90 minutes: requests grow by 50 a record."""
OK_MISTRAL = ("h-ok", "mistral", "a100")
"""The same host's second process: started 10 minutes ago, 7 requests a record."""
QUIET = ("h-quiet", "llama", "h100")
"""Stopped reporting 40.5 minutes ago (20 records in the range)."""
GONE = ("h-gone", "llama", "a100")
"""Stopped reporting 3 hours ago: nothing in the range, still listed (quiet)."""
RETIRED = ("h-retired", "llama", "a100")
"""Last reported 8 days ago: past the default lookback (7 days), taken as retired, not listed."""
AUTH = ("h-auth", "llama", "h100")
"""Its token is refused: 3 spans a record for 30 records in the range (5 refused before it), kernel failures."""
BUSY = ("h-busy", "qwen", "h100")
"""The service sheds its load (back-pressure) and was briefly unreachable."""
RESTART = ("h-restart", "mistral", "h100")
"""Restarted 29.5 minutes ago: before, 100 requests a record and 4 SDK errors; after, 10 a record, errors
1 then 2, records dropped from the 5th record after the restart."""
AUTH_ERROR: Final = "OtlpExportError: 401 Unauthorized: the service refused the token"
RESTART_AT: Final = 40
"""Index (from the oldest, of 70) of the restarted process's first record."""


def _event(key: tuple[str, str, str], ts: datetime, **counters: int | str) -> SdkHealthEvent:
    host, model, hw_pool = key
    return SdkHealthEvent(ts=ts, host=host, model=model, hw_pool=hw_pool, **counters)


def _every_minute(newest: datetime, n: int) -> list[datetime]:
    """``n`` timestamps a minute apart, oldest first, the last at ``newest``."""
    return [newest - (n - 1 - i) * MIN for i in range(n)]


def health_events(now: datetime) -> list[SdkHealthEvent]:
    """The records (see the module's constants for what each process shows)."""
    events: list[SdkHealthEvent] = []
    for i, ts in enumerate(_every_minute(now - HALF, 90)):
        events.append(_event(OK, ts, requests_seen=50 * i, spans_sent=50 * i, queue_depth=i % 7))
    for i, ts in enumerate(_every_minute(now - HALF, 10)):
        events.append(_event(OK_MISTRAL, ts, requests_seen=7 * (i + 1), spans_sent=7 * (i + 1)))
    for i, ts in enumerate(_every_minute(now - 40 * MIN - HALF, 51)):
        events.append(_event(QUIET, ts, requests_seen=20 * i, spans_sent=20 * i))
    for i, ts in enumerate(_every_minute(now - 3 * timedelta(hours=1), 5)):
        events.append(_event(GONE, ts, requests_seen=i))
    events.append(_event(RETIRED, now - timedelta(days=8), requests_seen=9))
    events.append(_event(AUTH, now - 2 * timedelta(hours=1), refused_auth=5, spans_refused=5))
    for i, ts in enumerate(_every_minute(now - HALF, 30)):
        refused = 5 + 3 * (i + 1)
        events.append(
            _event(AUTH, ts, requests_seen=10 * (i + 1), refused_auth=refused, spans_refused=refused,
                   kernel_failures=2 if i >= 10 else 0, kernel_fallbacks=1, last_error=AUTH_ERROR)
        )  # fmt: skip
    for i, ts in enumerate(_every_minute(now - HALF, 5)):
        events.append(
            _event(BUSY, ts, requests_seen=10 * (i + 1), spans_sent=6 * (i + 1), refused_back_pressure=4 * i,
                   refused_down=2 if i else 0, spans_refused=4 * i + (2 if i else 0), queue_depth=900 + i,
                   last_error="OtlpExportError: 503 Service Unavailable")
        )  # fmt: skip
    for i, ts in enumerate(_every_minute(now - HALF, 70)):
        if i < RESTART_AT:
            counters = {"requests_seen": 100 * (i + 1), "sdk_errors": 4}
        else:
            after = i - RESTART_AT
            counters = {"requests_seen": 10 * (after + 1), "sdk_errors": 1 if after == 0 else 2,
                        "records_dropped": 3 if after >= 5 else 0}  # fmt: skip
        events.append(_event(RESTART, ts, **counters))
    return events
