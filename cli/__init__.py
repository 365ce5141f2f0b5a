"""The ``inferensics`` command line."""
