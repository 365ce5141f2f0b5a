"""The ``pip install`` line for a missing extra names what this environment was installed from.

The ``direct_url.json`` texts below are the shapes PEP 610 specifies (and pip writes) for each origin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inferensics.schema.install_hint import pip_install_hint, pip_install_line

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("direct_url", "line"),
    [
        (
            '{"url": "file:///src/inferensics", "dir_info": {"editable": true}}',
            "pip install -e '/src/inferensics[service]'",
        ),
        ('{"url": "file:///src/inferensics", "dir_info": {}}', "pip install '/src/inferensics[service]'"),
        (
            '{"url": "file:///dist/inferensics-0.1.0-py3-none-any.whl", "archive_info": {"hashes": {"sha256": "ab"}}}',
            "pip install '/dist/inferensics-0.1.0-py3-none-any.whl[service]'",
        ),
        (
            '{"url": "file:///my%20checkouts/inferensics", "dir_info": {}}',
            "pip install '/my checkouts/inferensics[service]'",
        ),
        (
            '{"url": "https://example.com/inferensics.git", "vcs_info": {"vcs": "git", "commit_id": "7f3a"}}',
            "pip install 'inferensics[service] @ git+https://example.com/inferensics.git@7f3a'",
        ),
        (
            '{"url": "https://example.com/inferensics-0.1.0-py3-none-any.whl", "archive_info": {}}',
            "pip install 'inferensics[service] @ https://example.com/inferensics-0.1.0-py3-none-any.whl'",
        ),
        (None, "pip install 'inferensics[service]'"),  # an index install: pip writes no direct_url.json
        ("", "pip install 'inferensics[service]'"),
        ("{not json", "pip install 'inferensics[service]'"),  # a damaged file: the bare name, not a traceback
        ("[1, 2]", "pip install 'inferensics[service]'"),
        ('{"url": 3}', "pip install 'inferensics[service]'"),
    ],
)
def test_line_names_the_origin(direct_url: str | None, line: str) -> None:
    assert pip_install_line("service", direct_url) == line


def test_this_environment_is_the_editable_checkout() -> None:
    """The test environment is ``pip install -e`` of this checkout (``make setup``): the hint says so."""
    hint = pip_install_hint("dashboard")
    assert hint.startswith("pip install -e '")
    assert hint.endswith("[dashboard]'")
    assert Path(hint.removeprefix("pip install -e '").removesuffix("[dashboard]'")).resolve() == ROOT
