"""Compile times out of a ``compilation_metrics`` record: which field fills which ``compiles`` column.

PyTorch has named a compile's times two ways. The seconds fields (``entire_frame_compile_time_s``...) are
the old names; since 2.5 the record carries the microsecond fields (``dynamo_cumulative_compile_time_us``...)
and fills the old ones from them (``torch._dynamo.utils``, ``legacy_metrics``), except in the builds between
that wrote ``null`` there (the corpus's ``simple.log``, ``cache_hit_miss.log``). So each column reads its
seconds field and, when that is missing, the microsecond field torch itself derives it from:

==================  ================================  ==================================================
column              seconds field                     else (microseconds, divided by 10⁶)
==================  ================================  ==================================================
``entire_frame_s``  ``entire_frame_compile_time_s``   ``dynamo_cumulative_compile_time_us``, else
                                                      ``end_time_us - start_time_us`` (a record no
                                                      Dynamo frame timed: AOTInductor, strict export)
``backend_s``       ``backend_compile_time_s``        ``aot_autograd_cumulative_compile_time_us``
``inductor_s``      ``inductor_compile_time_s``       ``inductor_cumulative_compile_time_us``
``codegen_s``       ``code_gen_time_s``               ``inductor_code_gen_cumulative_compile_time_us``
``ts``              ``start_time_us`` (µs)            ``start_time`` (s, the old name)
==================  ================================  ==================================================

Every other time of the record (pass times, Triton compile, autotuning, GC, time before a restart, remote
cache get/put, logging overhead...) has no column: it is kept in the row's ``attrs`` under its microsecond
name, as an integer number of microseconds, when it is not zero (:func:`phase_times`). ``duration_us`` (the
sum of the timed phases, which counts nested ones twice) and ``end_time_us`` (``ts`` plus the compile time)
are not kept; ``triton_kernel_compile_times_us`` is a text list per kernel, not a time, and is not kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

COLUMN_FIELDS: Final = {
    "entire_frame_s": ("entire_frame_compile_time_s", "dynamo_cumulative_compile_time_us"),
    "backend_s": ("backend_compile_time_s", "aot_autograd_cumulative_compile_time_us"),
    "inductor_s": ("inductor_compile_time_s", "inductor_cumulative_compile_time_us"),
    "codegen_s": ("code_gen_time_s", "inductor_code_gen_cumulative_compile_time_us"),
}
"""Column → (seconds field, microsecond field) of ``compilation_metrics``."""
LEGACY_US: Final = {
    "start_time": ("start_time_us", 1e6),
    "dynamo_time_before_restart_s": ("dynamo_compile_time_before_restart_us", 1e6),
    "remote_cache_time_saved_s": ("distributed_ephemeral_timeout_us", 1e6),
    "structured_logging_overhead_s": ("structured_logging_overhead_us", 1e6),
    "remote_fx_graph_cache_get_time_ms": ("remote_fx_graph_cache_get_time_us", 1e3),
    "remote_fx_graph_cache_put_time_ms": ("remote_fx_graph_cache_put_time_us", 1e3),
    **{s: (us, 1e6) for s, us in COLUMN_FIELDS.values()},
}
"""Old field → (the microsecond field torch fills it from, its factor to microseconds)."""
NOT_KEPT: Final = frozenset({"start_time_us", "end_time_us", "duration_us", *(us for _, us in COLUMN_FIELDS.values())})
"""Microsecond fields that fill a column or ``ts``, or repeat others (see the module docstring)."""
_TO_US: Final = (("_us", 1.0), ("_ms", 1e3), ("_ns", 1e-3), ("_s", 1e6))
"""Unit suffix of a time field → its factor to microseconds."""


@dataclass(frozen=True, slots=True)
class CompileTimes:
    """The column times of one compile, in seconds (0.0: the record does not say)."""

    entire_frame_s: float = 0.0
    backend_s: float = 0.0
    inductor_s: float = 0.0
    codegen_s: float = 0.0
    start: datetime | None = None
    """When the compile started (``None``: the record does not say)."""


def compile_times(metrics: Mapping[str, Any]) -> CompileTimes:
    """Read the column times of a ``compilation_metrics`` body (see the module docstring for the fields)."""
    seconds = {column: _seconds(metrics, s, us) for column, (s, us) in COLUMN_FIELDS.items()}
    start_us, end_us = _number(metrics.get("start_time_us")), _number(metrics.get("end_time_us"))
    if seconds["entire_frame_s"] is None and start_us is not None and end_us is not None and end_us >= start_us:
        seconds["entire_frame_s"] = (end_us - start_us) / 1e6
    start_s = start_us / 1e6 if start_us is not None else _number(metrics.get("start_time"))
    start = datetime.fromtimestamp(start_s, UTC) if start_s is not None else None
    return CompileTimes(**{k: v or 0.0 for k, v in seconds.items()}, start=start)


def phase_times(metrics: Mapping[str, Any]) -> dict[str, str]:
    """The times of a ``compilation_metrics`` body that no column holds, for ``attrs``: microsecond name →
    whole microseconds, zeros left out. A field in another unit is kept under its microsecond name
    (:data:`LEGACY_US`, else its name with ``_us`` for its unit), unless that field is in the record too."""
    out: dict[str, str] = {}
    for name, value in metrics.items():
        number = _number(value)
        if not number:
            continue
        if name in LEGACY_US:
            micros_name, factor = LEGACY_US[name]
        else:
            unit = next(((suffix, f) for suffix, f in _TO_US if name.endswith(suffix)), None)
            if unit is None:
                continue
            micros_name, factor = name.removesuffix(unit[0]) + "_us", unit[1]
        if micros_name in NOT_KEPT or (micros_name != name and _number(metrics.get(micros_name)) is not None):
            continue
        out[micros_name] = str(round(number * factor))
    return out


def _seconds(metrics: Mapping[str, Any], seconds_field: str, micros_field: str) -> float | None:
    value = _number(metrics.get(seconds_field))
    if value is not None:
        return value
    micros = _number(metrics.get(micros_field))
    return micros / 1e6 if micros is not None else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)
