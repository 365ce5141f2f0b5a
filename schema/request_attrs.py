"""Keys of a request's ``attrs`` map that the host SDK writes and the drill-down reads, defined once.

They are no columns (``columns.py`` holds those, and its test checks that each constant there names one): a
request served under a release bundle carries them in ``attrs``. The host SDK
(``inferensics.collector.host.bundle_guard``) sets them; ``inferensics.analytics.drilldown`` returns them as columns
of ``request_detail`` and says what they mean.
"""

from typing import Final

BUNDLE_STATUS: Final = "bundle_status"
"""``hit`` (every graph that served the request came from its bundle) or ``miss`` (a graph that served it is not in
the bundle); absent when no graph gated by a bundle served it."""
BUNDLE_UNQUALIFIED_SHAPE: Final = "bundle_unqualified_shape"
"""The sizes at which a bundle hit served the request that the bundle never qualified its graph at, each once in the
order of their first call, ``", "`` between them (``[5,8]``; ``[9,8], [7,8]``); past the host SDK's bound on the
shapes named (``inferensics.collector.host.records.REQUEST_UNQUALIFIED_SHAPES``), ``(+N calls at other shapes)``
after them; absent when none."""
BUNDLE_UNQUALIFIED_CALLS: Final = "bundle_unqualified_calls"
"""Beside :data:`BUNDLE_UNQUALIFIED_SHAPE`: how many of the request's calls ran at those sizes (decimal text)."""
