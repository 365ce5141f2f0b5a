"""Records built without validation, from values the SDK itself produced (the background thread's hot path).

Validating a :class:`~inferensics.schema.events.RequestEvent` costs about 30 µs of Python per request
(``model_construct`` as much: it loops over the 34 fields), all of it holding the GIL that the serving
thread needs. The SDK's own values are already in the schema's canonical form (UTC datetimes,
float32-rounded floats, tuples), so the request record is assembled the way ``model_construct`` does it,
in one step. The schema's models stay the authority: a test checks that every record built here
equals its validated round trip (``RequestEvent.model_validate(r.model_dump()) == r``).
"""

from __future__ import annotations

import struct
from typing import Any, Final

from pydantic import BaseModel

from inferensics.schema.events import RequestEvent
from inferensics.schema.types import to_float32

REQUEST_FIELDS: Final = frozenset(RequestEvent.model_fields)
_U32_MAX: Final = 2**32 - 1
_U8_MAX: Final = 2**8 - 1
_pack_f32, _unpack_f32 = struct.Struct("<f").pack, struct.Struct("<f").unpack
# BaseModel's slot descriptors, set directly (what object.__setattr__ finds for these names, one lookup less).
_new_request = RequestEvent.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_FIELDS_SET: Final = set(REQUEST_FIELDS)
"""Every record's ``__pydantic_fields_set__``, one set shared by all: the models are frozen (nothing adds to
it in place) and pydantic's ``model_copy`` copies it before an update; a new set per record cost ~0.3 us."""


def trusted_request(values: dict[str, Any], *, check: bool = True) -> RequestEvent:
    """A :class:`RequestEvent` over ``values`` (every field, canonical types) without validation.

    ``check=False`` skips the field-name check, for a caller whose dict literal names every field (the
    pipeline; the round-trip test covers it).

    Raises:
        ValueError: ``values`` does not name exactly the model's fields (a programming error in the SDK,
            caught and counted by the pipeline).
    """
    if check and values.keys() != REQUEST_FIELDS:
        missing = sorted(REQUEST_FIELDS - values.keys())
        extra = sorted(values.keys() - REQUEST_FIELDS)
        raise ValueError(f"request record fields differ from RequestEvent: missing {missing}, unknown {extra}")
    event = _new_request(RequestEvent)
    # The four attributes pydantic's own model_construct sets (pydantic v2's documented construct path).
    _set_dict(event, values)
    _set_fields_set(event, _FIELDS_SET)
    _set_extra(event, None)
    _set_private(event, None)
    return event


def f32(value: float) -> float:
    """``value`` rounded as the schema's ``F32`` columns round it (:func:`to_float32`; here one pack and
    unpack for a value that fits, which is nearly every value, and to_float32 for the rest)."""
    try:
        return _unpack_f32(_pack_f32(value))[0]  # type: ignore[no-any-return]
    except (OverflowError, struct.error):  # rounds to ±inf (struct refuses it), or not a float
        return to_float32(value)


def u32(value: int) -> int:
    """``value`` clipped into ``UInt32``."""
    return value if 0 <= value <= _U32_MAX else min(max(value, 0), _U32_MAX)


def u8(value: int) -> int:
    """``value`` clipped into ``UInt8``."""
    return value if 0 <= value <= _U8_MAX else min(max(value, 0), _U8_MAX)
