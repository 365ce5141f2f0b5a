"""Why the store refused a segment: an outage that passes, or the segment's own content.

The writer keeps a segment and waits for the store whenever a refusal can pass by itself: a full or
read-only disk, permissions, a cancelled or timed-out query, too many parts, memory, a lost connection, a
missing table (a store re-created empty). Only what the engine says about the data itself (it cannot parse
it, a value does not fit a type) is a *content* refusal, after which a segment the store keeps refusing
while it answers is quarantined so that the segments behind it are written. Anything not known to be
content counts as an outage: a segment waits rather than being moved aside for a reason that passes.
"""

from __future__ import annotations

import re
from typing import Final

CONTENT_CODES: Final = frozenset(
    {
        6,  # CANNOT_PARSE_TEXT
        26,  # CANNOT_PARSE_QUOTED_STRING
        27,  # CANNOT_PARSE_INPUT_ASSERTION_FAILED
        32,  # ATTEMPT_TO_READ_AFTER_EOF
        33,  # CANNOT_READ_ALL_DATA
        38,  # CANNOT_PARSE_DATE
        41,  # CANNOT_PARSE_DATETIME
        53,  # TYPE_MISMATCH
        69,  # ARGUMENT_OUT_OF_BOUND
        70,  # CANNOT_CONVERT_TYPE
        72,  # CANNOT_PARSE_NUMBER
        117,  # INCORRECT_DATA
        131,  # TOO_LARGE_STRING_SIZE
        321,  # VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
        434,  # CANNOT_PARSE_PROTOBUF_SCHEMA
        436,  # ILLEGAL_TYPE_OF_COLUMN_FOR_PROTOBUF
        444,  # UNKNOWN_PROTOBUF_FORMAT
    }
)
"""Engine error codes that say the data itself cannot be read or stored."""

_CODE: Final = re.compile(r"\bCode: (\d+)\b")


def is_content_refusal(exc: BaseException) -> bool:
    """Whether the store refused the data itself (quarantine candidate) rather than being unable to write it."""
    text = str(exc)
    match = _CODE.search(text)
    if match is None:
        return False  # a driver, socket, filesystem or fault-injection error: the store, not the data
    return int(match.group(1)) in CONTENT_CODES
