"""What a build tells its user as it goes: one line per stage (importing the model, each shape compiled and
qualified with its time, the kernel-evidence check, signing), so a build that compiles for minutes is not silent.

``bundle build`` prints these lines on stderr (``--quiet`` drops them); stdout keeps only the result.
"""

from __future__ import annotations

from collections.abc import Callable

from inferensics.bundle.qualify import ShapeRun

Progress = Callable[[str], None]
"""Called with each progress line of a build."""


def silent(line: str) -> None:
    """A :data:`Progress` that says nothing."""
    del line


def shape_line(policy: str, run: ShapeRun) -> str:
    """One shape served under ``policy``: its compile and first-request time, steady latency, and accuracy (when
    the run checked it)."""
    shape = "x".join(map(str, run.shape))
    padded = f" padded to {'x'.join(map(str, run.served_as))}" if run.served_as != run.shape else ""
    graphs = f"{run.new_graphs} new graph{'s' if run.new_graphs != 1 else ''}" if run.graphs else "ran eagerly"
    line = (
        f"{policy}: shape {shape}{padded} compiled in {run.compile_s:.1f} s ({graphs}), first request "
        f"{run.first_s:.1f} s, steady {run.latency_s * 1e3:.3g} ms"
    )
    a = run.accuracy
    if a is None:
        return line
    if a.comparison is None:
        return f"{line}; accuracy not checked ({a.unchecked})"
    return f"{line}; accuracy {'within tolerance' if a.comparison.passed else 'OUTSIDE tolerance'}"
