"""Column names are defined once: every model field has a constant, every constant names a column."""

from __future__ import annotations

from inferensics.schema import EVENT_MODELS, ROLLUPS, columns


def _constants() -> dict[str, str]:
    return {k: v for k, v in vars(columns).items() if k.isupper() and isinstance(v, str)}


def test_every_field_has_a_constant() -> None:
    values = set(_constants().values())
    missing = sorted(f"{m.TABLE.name}.{f}" for m in EVENT_MODELS for f in m.model_fields if f not in values)
    assert missing == []


def test_every_constant_names_a_column() -> None:
    used = {f for m in EVENT_MODELS for f in m.model_fields}
    used |= {"bucket"} | {c for r in ROLLUPS for c in r.keys} | {v.name for r in ROLLUPS for v in r.values}
    used |= {"version", "name", "checksum", "applied_at"}  # schema_migrations
    used |= {"latency_state"}  # the request rollups before schema version 4 (read by migration 4)
    unused = sorted(k for k, v in _constants().items() if v not in used)
    assert unused == []


def test_constant_names_match_their_values() -> None:
    assert all(k.lower() == v for k, v in _constants().items())


def test_every_field_is_documented() -> None:
    undocumented = [
        f"{m.__name__}.{name}" for m in EVENT_MODELS for name, info in m.model_fields.items() if not info.description
    ]
    assert undocumented == []
