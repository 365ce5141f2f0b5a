"""Where each kernel sits in an artifact's generated code (Inductor output code)."""

from __future__ import annotations

import re

import polars as pl

from inferensics.schema import columns as col


def kernel_lines(code: str, kernel_names: list[str]) -> pl.DataFrame:
    """For each kernel, the first line defining it and the lines launching it (1-based).

    A definition is ``name = async_compile...`` or ``def name(``; a launch is ``name.run(`` or a call
    ``name(`` outside its definition (extern kernels such as ``extern_kernels.mm(`` only have launches).
    Columns: kernel_name, defined_at (null when not defined in this file), launched_at (list).
    """
    lines = code.splitlines()
    defined: list[int | None] = []
    launched: list[list[int]] = []
    for name in kernel_names:
        escaped = re.escape(name)
        definition = re.compile(rf"^\s*(?:{escaped}\s*=|def\s+{escaped}\s*\()")
        launch = re.compile(rf"(?<![\w.]){escaped}(?:\.run)?\(")
        first = next((i + 1 for i, line in enumerate(lines) if definition.search(line)), None)
        calls = [i + 1 for i, line in enumerate(lines) if launch.search(line) and not definition.search(line)]
        defined.append(first)
        launched.append(calls)
    return pl.DataFrame(
        {col.KERNEL_NAME: kernel_names, "defined_at": defined, "launched_at": launched},
        schema={col.KERNEL_NAME: pl.String, "defined_at": pl.Int64, "launched_at": pl.List(pl.Int64)},
    )
