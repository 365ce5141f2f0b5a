"""The SDK's settings refuse values it cannot work with at start-up, naming the setting (never later, in the
serving path)."""

from __future__ import annotations

from typing import Any

import pytest

from inferensics.collector.host import CaptureRules, ConfigError, SdkConfig


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"sample_rate": 1.5}, "sample_rate must be within [0, 1], got 1.5"),
        ({"sample_rate": float("nan")}, "sample_rate must be within [0, 1], got nan"),
        ({"queue_capacity": 0}, "queue_capacity must be positive"),
        ({"capture": CaptureRules(rate=-0.1)}, "capture.rate must be within [0, 1]"),
        ({"flush_interval_s": 0.0}, "flush_interval_s must be positive"),  # would spin the background thread
        ({"flush_interval_s": float("nan")}, "flush_interval_s must be positive"),
        ({"batch_rows": 0}, "batch_rows must be positive"),
        ({"fingerprint_head": -1}, "fingerprint_head must not be negative"),
        ({"fingerprint_rate": 1.5}, "fingerprint_rate must be within [0, 1], got 1.5"),
        ({"fingerprint_rate": float("nan")}, "fingerprint_rate must be within [0, 1], got nan"),
        ({"shape_buckets": ()}, "shape_buckets must be positive integers"),
        ({"fingerprint_rate": "abc"}, "fingerprint_rate must be a number, got 'abc'"),
        ({"sample_rate": None}, "sample_rate must be a number, got None"),
        ({"queue_capacity": 2.5}, "queue_capacity must be a number, got 2.5"),
        ({"fingerprint_rate": True}, "fingerprint_rate must be a number, got True"),
        ({"provenance_level": 7}, "provenance_level must be one of 0, 1, 2"),
        ({"provenance_level": -1}, "provenance_level must be one of 0, 1, 2"),
        ({"shape_buckets": (1, 0, 4)}, "shape_buckets must be positive integers"),
    ],
)
def test_bad_settings_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        SdkConfig(**values)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"INFERENSICS_SAMPLE_RATE": "abc"}, "$INFERENSICS_SAMPLE_RATE: 'abc' is not a valid float"),
        ({"INFERENSICS_QUEUE_CAPACITY": "1e3"}, "$INFERENSICS_QUEUE_CAPACITY: '1e3' is not a valid int"),
        ({"INFERENSICS_FINGERPRINT_RATE": "half"}, "$INFERENSICS_FINGERPRINT_RATE: 'half' is not a valid float"),
        (
            {"INFERENSICS_SAMPLE_RATE": "2"},
            "sample_rate must be within [0, 1], got 2.0 (from $INFERENSICS_SAMPLE_RATE)",
        ),
        (
            {"INFERENSICS_FINGERPRINT_RATE": "2"},
            "fingerprint_rate must be within [0, 1], got 2.0 (from $INFERENSICS_FINGERPRINT_RATE)",
        ),
    ],
)
def test_bad_environment_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        SdkConfig.from_env(env)
    assert message in str(info.value)


def test_good_settings_pass() -> None:
    cfg = SdkConfig.from_env({"INFERENSICS_SAMPLE_RATE": "0.25", "INFERENSICS_QUEUE_CAPACITY": "8"}, batch_rows=5)
    assert (cfg.sample_rate, cfg.queue_capacity, cfg.batch_rows) == (0.25, 8, 5)


def test_a_value_given_in_code_is_not_blamed_on_the_environment() -> None:
    with pytest.raises(ConfigError) as info:
        SdkConfig(fingerprint_rate=2)
    assert str(info.value) == "fingerprint_rate must be within [0, 1], got 2"
    with pytest.raises(ConfigError) as info:  # the variable is set, but the code's value is the one refused
        SdkConfig.from_env({"INFERENSICS_FINGERPRINT_RATE": "0.5"}, fingerprint_rate=2)
    assert "$INFERENSICS_FINGERPRINT_RATE" not in str(info.value)
