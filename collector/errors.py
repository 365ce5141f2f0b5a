"""The collector's one configuration error, shared by the host SDK's and the service's settings.

Standard library only, so the host SDK and the service each raise it without importing the other.
"""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A setting has a bad value; the message names the setting, where the value came from and how to fix it."""
