"""Errors of the analytics library: all are ``ValueError``s the service answers with HTTP 400."""

from __future__ import annotations


class AnalyticsError(ValueError):
    """A query that cannot be answered as asked; the message says what to change."""


class UnknownFilterValue(AnalyticsError):  # noqa: N818 (the name the service and the dashboard use)
    """A filter value that matches nothing in the store (a typo, not an empty slice).

    Attributes:
        dimension: The filter (``model``, ``hw_pool``, ``traffic_class``, ``host``, ``bundle``).
        value: The value given.
        known: Some values that do exist, for the message.
    """

    def __init__(self, dimension: str, value: str, known: list[str]) -> None:
        shown = ", ".join(repr(k) for k in known[:20]) or "none"
        more = f" (and {len(known) - 20} more)" if len(known) > 20 else ""
        super().__init__(f"unknown {dimension} {value!r}: it matches nothing in the store; known: {shown}{more}")
        self.dimension = dimension
        self.value = value
        self.known = known


class UnsupportedFilter(AnalyticsError):  # noqa: N818
    """A filter the queried events do not carry (for example ``traffic_class`` on compiles)."""


class NotFound(AnalyticsError):  # noqa: N818
    """An id (request id, bundle id) that the store does not hold."""
