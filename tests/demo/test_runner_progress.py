"""Progress while a worker compiles (issue 20: ``make run`` sat silent through a 101-s first compile)."""

from __future__ import annotations

import io
import time
from typing import Any

from rich.console import Console
from rich.progress import Progress, TextColumn

from inferensics.demo import runner


def _progress(terminal: bool) -> tuple[Progress, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=200, soft_wrap=True)
    return Progress(TextColumn("{task.fields[status]}"), console=console), out


def test_a_long_compile_is_shown_while_it_runs() -> None:
    progress, out = _progress(terminal=False)
    task = progress.add_task("w", status="compiling and serving")
    begin: dict[str, Any] = {"request_id": "req-01-00003", "model": "tiny-decoder", "expected": "compile"}
    since = time.monotonic() - 42
    running = {"cpu-a-baseline-0": (begin, since)}
    told: dict[str, float] = {}
    runner._show_running(progress, {"cpu-a-baseline-0": task}, running, told, terminal=False)
    status = progress.tasks[0].fields["status"]
    assert status.startswith("compile of tiny-decoder (req-01-00003) running 4")
    # Without a terminal the bars are not drawn: a line says it, once per HEARTBEAT_S.
    lines = [line for line in out.getvalue().splitlines() if "running" in line]
    assert len(lines) == 1
    assert lines[0].startswith("cpu-a-baseline-0")
    runner._show_running(progress, {"cpu-a-baseline-0": task}, running, told, terminal=False)
    assert len([line for line in out.getvalue().splitlines() if "running" in line]) == 1


def test_a_quick_request_leaves_the_line_alone() -> None:
    progress, out = _progress(terminal=False)
    task = progress.add_task("w", status="hit 3")
    begin: dict[str, Any] = {"request_id": "req-01-00010", "model": "tiny-decoder", "expected": "hit"}
    running = {"w": (begin, time.monotonic())}
    runner._show_running(progress, {"w": task}, running, {}, terminal=False)
    assert progress.tasks[0].fields["status"] == "hit 3"
    assert out.getvalue() == ""
