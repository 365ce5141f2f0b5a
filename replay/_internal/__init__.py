"""Implementation of :mod:`inferensics.replay`; nothing here is public API."""
