"""The runnable examples in the schema docstrings stay true."""

from __future__ import annotations

import doctest

import pytest

from inferensics.schema import dsn, types


@pytest.mark.parametrize("module", [dsn, types], ids=lambda m: m.__name__)
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted > 0
    assert result.failed == 0
