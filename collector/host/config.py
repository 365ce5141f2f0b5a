"""SDK settings, declared once: name, environment variable, default, meaning.

Precedence: constructor argument > environment variable > default. A bad value raises
:class:`ConfigError` naming the setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from inferensics.collector.errors import ConfigError

SAMPLE_RATE_ENV: Final = "INFERENSICS_SAMPLE_RATE"
"""Fraction of requests profiled for kernel timings (0 disables the profiler)."""
QUEUE_CAPACITY_ENV: Final = "INFERENSICS_QUEUE_CAPACITY"
"""Items the hand-off queue holds before it drops (and counts) new ones."""
FINGERPRINT_RATE_ENV: Final = "INFERENSICS_FINGERPRINT_RATE"
"""Fraction of requests whose output is fingerprinted, CPU and device outputs alike (unset: the defaults of
:data:`CPU_FINGERPRINT_RATE` and :data:`DEVICE_FINGERPRINT_RATE`)."""
SIGTERM_HANDLER_ENV: Final = "INFERENSICS_SIGTERM_HANDLER"
"""Whether the SDK shuts the tracker down on SIGTERM (``SdkConfig.sigterm_handler``): ``1``/``true``/``on`` (the
default) or ``0``/``false``/``off``."""
CPU_FINGERPRINT_RATE: Final = 1 / 32
"""Default fraction of requests with a CPU output that are fingerprinted. On a CPU server the fingerprint
is read by the same cores that serve, and costs about as much as a small model's whole request
(benchmarks/bench_sdk_overhead.py ``--served``): one request in 32, chosen by request id."""
DEVICE_FINGERPRINT_RATE: Final = 1.0
"""Default fraction of requests with a CUDA (device) output that are fingerprinted: all of them (a fused
kernel launch on the serving thread, read back without a synchronization)."""


Redactor = Callable[[dict[str, Any]], dict[str, Any]]
"""Gets the named input tensors of a request about to be captured; returns what may be stored."""


@dataclass(frozen=True)
class CaptureRules:
    """When to store a request's inputs for replay (off unless ``enabled``).

    Attributes:
        enabled: Master switch; off by default (inputs are tenant data).
        on_error: Capture requests that raised.
        on_nonfinite: Capture requests whose output fingerprint has NaN or inf.
        rate: Fraction of all other requests to capture (deterministic on the request id).
        models: Only these models (empty: all).
        traffic_classes: Only these traffic classes (empty: all).
        max_bytes: Larger captures are skipped and counted.
        redact: Optional hook that drops or masks inputs before they are stored.
    """

    enabled: bool = False
    on_error: bool = True
    on_nonfinite: bool = True
    rate: float = 0.0
    models: tuple[str, ...] = ()
    traffic_classes: tuple[str, ...] = ()
    max_bytes: int = 64 * 1024 * 1024
    redact: Redactor | None = None


@dataclass(frozen=True)
class SdkConfig:
    """Settings of the host SDK.

    Attributes:
        sample_rate: Fraction of requests profiled for kernel timings.
        queue_capacity: Hand-off queue size; beyond it records are dropped and counted.
        flush_interval_s: How often the background thread drains the queue. Each drain takes the GIL
            from the serving thread for the whole batch, and each wake-up costs two thread switches: a
            host-bound decode loop loses less to few large batches than to many small ones.
        batch_rows: Rows buffered per table before a store insert (direct-to-store exporter).
        provenance_level: Inductor provenance tracking level for compiles through ``tracker.compile``: 1
            (default) records which FX nodes and user source lines each generated kernel comes from, the
            request page's kernel → source-line map; 0 turns it off (benchmarks/bench_provenance_cost.py
            measures what it costs).
        fingerprint_head: Leading argmax ids kept in the output fingerprint.
        fingerprint_rate: Fraction of requests whose output ``set_output`` fingerprints, chosen by a hash
            of the request id (the same ids on every host and bundle, so canary and replay compare like
            with like); the others are recorded with ``fp_status`` ``unsampled``. ``None`` (default):
            :data:`CPU_FINGERPRINT_RATE` for CPU outputs, :data:`DEVICE_FINGERPRINT_RATE` for device
            outputs. 1 fingerprints every request, 0 none.
        shape_buckets: Upper edges for the shape bucketing policy (per dimension, powers of two default).
        capture: Input-capture rules.
        trace_compiles: Attach the ``torch.__trace`` sink (compile records, cache events, output code).
        health_interval_s: How often the SDK exports its own health record (``sdk_health``: queue depth,
            drops, refused exports by cause); 0 turns it off. A host whose records stop is a host gone quiet.
        journal_dir: The crash journals' folder (:mod:`inferensics.collector.host.journal`): the requests a
            process was running when it died, exported as ``error`` rows by the next tracker started on the
            host. ``None`` (default): ``$INFERENSICS_JOURNAL_DIR``, else ``$XDG_STATE_HOME/inferensics/journal``;
            ``"off"`` turns it off.
        sigterm_handler: Shut the tracker down on SIGTERM where the process left SIGTERM's default action
            (:mod:`inferensics.collector.host.process_lifecycle`: what the background thread
            has not exported yet is flushed, then the process ends by SIGTERM as before). ``False`` (or
            ``$INFERENSICS_SIGTERM_HANDLER=0``) leaves SIGTERM alone, and removes the SDK's handler if an earlier
            tracker of the process set it: a process that installs its own handler later, or wants SIGTERM to end
            it at once. What was not exported is then lost, as on SIGKILL.
    """

    sample_rate: float = 0.0
    queue_capacity: int = 65_536
    flush_interval_s: float = 0.25
    batch_rows: int = 10_000
    provenance_level: int = 1
    fingerprint_head: int = 16
    fingerprint_rate: float | None = None
    shape_buckets: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
    capture: CaptureRules = field(default_factory=CaptureRules)
    trace_compiles: bool = True
    health_interval_s: float = 60.0
    journal_dir: str | None = None
    sigterm_handler: bool = True

    def __post_init__(self) -> None:
        for name, kind in _NUMBERS.items():
            value = getattr(self, name)
            if value is None and name == "fingerprint_rate":
                continue
            if isinstance(value, bool) or not isinstance(value, kind):
                raise ConfigError(f"{name} must be a number, got {value!r}")
        if not 0.0 <= self.sample_rate <= 1.0:
            raise ConfigError(f"sample_rate must be within [0, 1], got {self.sample_rate}")
        if self.queue_capacity < 1:
            raise ConfigError(f"queue_capacity must be positive, got {self.queue_capacity}")
        if not 0.0 <= self.capture.rate <= 1.0:
            raise ConfigError(f"capture.rate must be within [0, 1], got {self.capture.rate}")
        if not self.flush_interval_s > 0:  # 0 would spin the background thread against the serving one
            raise ConfigError(f"flush_interval_s must be positive, got {self.flush_interval_s}")
        if self.health_interval_s < 0:
            raise ConfigError(f"health_interval_s must not be negative, got {self.health_interval_s}")
        if self.batch_rows < 1:
            raise ConfigError(f"batch_rows must be positive, got {self.batch_rows}")
        if self.provenance_level not in PROVENANCE_LEVELS:
            raise ConfigError(
                f"provenance_level must be one of {', '.join(map(str, PROVENANCE_LEVELS))} "
                f"(Inductor's trace.provenance_tracking_level: 0 off, 1 normal, 2 basic), got {self.provenance_level}"
            )
        if self.fingerprint_rate is not None and not 0.0 <= self.fingerprint_rate <= 1.0:
            raise ConfigError(f"fingerprint_rate must be within [0, 1], got {self.fingerprint_rate}")
        if self.fingerprint_head < 0:
            raise ConfigError(f"fingerprint_head must not be negative, got {self.fingerprint_head}")
        if not isinstance(self.sigterm_handler, bool):
            raise ConfigError(f"sigterm_handler must be True or False, got {self.sigterm_handler!r}")
        if not self.shape_buckets or any(
            isinstance(e, bool) or not isinstance(e, int) or e < 1 for e in self.shape_buckets
        ):
            raise ConfigError(f"shape_buckets must be positive integers, got {self.shape_buckets!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> SdkConfig:
        """Defaults, then environment variables, then explicit ``overrides``."""
        source = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, env_name, kind in _FROM_ENV:
            if env_name in source:
                try:
                    values[name] = kind(source[env_name])
                except ValueError:
                    what = _SWITCH_WORDS if kind is parse_switch else f"a valid {kind.__name__}"
                    raise ConfigError(f"${env_name}: {source[env_name]!r} is not {what}") from None
        from_env = {name: env_name for name, env_name, _ in _FROM_ENV if name in values and name not in overrides}
        values.update(overrides)
        try:
            return cls(**values)
        except ConfigError as exc:  # name the variable when the value came from it
            field_name = str(exc).split(" ", 1)[0]
            if field_name in from_env:
                raise ConfigError(f"{exc} (from ${from_env[field_name]})") from None
            raise


def parse_switch(text: str) -> bool:
    """An on/off environment value: ``1``, ``true``, ``on``, ``yes`` or ``0``, ``false``, ``off``, ``no`` (any case).

    Raises:
        ValueError: any other text.
    """
    word = text.strip().lower()
    if word in ("1", "true", "on", "yes"):
        return True
    if word in ("0", "false", "off", "no"):
        return False
    raise ValueError(text)


_SWITCH_WORDS: Final = "on or off (1/0, true/false, on/off, yes/no)"

_FROM_ENV: Final = (
    ("sample_rate", SAMPLE_RATE_ENV, float),
    ("queue_capacity", QUEUE_CAPACITY_ENV, int),
    ("fingerprint_rate", FINGERPRINT_RATE_ENV, float),
    ("sigterm_handler", SIGTERM_HANDLER_ENV, parse_switch),
)
"""The settings :meth:`SdkConfig.from_env` reads: field, environment variable, type."""
_NUMBERS: Final[dict[str, type | tuple[type, ...]]] = {
    "sample_rate": (int, float),
    "queue_capacity": int,
    "flush_interval_s": (int, float),
    "batch_rows": int,
    "provenance_level": int,
    "fingerprint_head": int,
    "fingerprint_rate": (int, float),
    "health_interval_s": (int, float),
}
"""The numeric settings and the types they take (a bool is refused: ``True`` is not a rate)."""
PROVENANCE_LEVELS: Final = (0, 1, 2)
"""The provenance levels Inductor takes (``trace.provenance_tracking_level``)."""
