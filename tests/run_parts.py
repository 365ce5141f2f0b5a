"""Run the test suite as ``make test`` does: one pytest process per part, several parts at a time.

    python tests/run_parts.py [--jobs N] [PART ...]

A part is a folder of ``tests/`` with an ``__init__.py``, or a top-level ``tests/test_*.py``. A folder named in
``SPLIT`` runs as one part per subfolder that holds tests (``collector/host``) and one for its own test files
(``collector``), so that no part is most of the suite's time; naming ``collector`` on the command line runs all of
them. Each part runs in its
own process, so a part that changes process-wide compiler state (a decomposition table, a cache salt, Dynamo
settings) cannot leak it into another part's compiles. Parts run ``--jobs`` at a time (default: the CPUs this
process may use; ``$TEST_JOBS`` overrides), the longest first so the lanes finish together. Each part's output is
kept in a file and printed whole when the part ends, so parts never interleave; a summary follows. The exit status
is the first failing part's, else 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SPLIT = ("collector",)
"""Folders whose subfolders run as parts of their own (each subfolder's tests still see the folder's conftest)."""

LONGEST_FIRST = (
    "bundle",
    "demo",
    "replay",
    "collector/service",
    "collector/host",
    "dashboard",
    "kernels",
    "cli",
    "collector/trace",
    "analytics",
    "test_slim_install.py",
    "schema",
)
"""Parts in the order of their running time in CI, longest first (the rest follow in name order): with two lanes
the longest part starts at once and the others fill the second lane."""


@dataclass
class Outcome:
    """How one part ended."""

    part: str
    returncode: int
    seconds: float
    summary: str


def _has_tests(folder: Path) -> bool:
    return any(folder.rglob("test_*.py"))


def discover(root: Path = ROOT) -> list[str]:
    """Every part of the suite under ``root``, longest first."""
    tests = root / "tests"
    found = [p.name for p in tests.glob("test_*.py")]
    for folder in (p for p in tests.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        if folder.name not in SPLIT:
            found.append(folder.name)
            continue
        found += [f"{folder.name}/{sub.name}" for sub in folder.iterdir() if sub.is_dir() and _has_tests(sub)]
        if any(folder.glob("test_*.py")):
            found.append(folder.name)
    found.sort()
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    return sorted(found, key=lambda name: (rank.get(name, len(rank)), name))


def _summary(log: str) -> str:
    """pytest's last line (``== 12 passed in 3.1s ==``), or the last line of output."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    return next((ln.strip("= ") for ln in reversed(lines) if ln.startswith("=")), lines[-1] if lines else "")


class Runner:
    """Parts in lanes; output printed whole, one part at a time."""

    def __init__(self, parts: list[str], jobs: int, pytest_args: list[str], root: Path = ROOT) -> None:
        self.root = root
        self.queue = list(parts)
        self.jobs = max(1, jobs)
        self.pytest_args = pytest_args
        self.lock = threading.Lock()
        self.outcomes: list[Outcome] = []
        self.children: set[subprocess.Popen[bytes]] = set()
        self.stopping = False

    def _next(self) -> str | None:
        with self.lock:
            return None if self.stopping or not self.queue else self.queue.pop(0)

    def _targets(self, part: str) -> list[str]:
        """pytest's arguments for ``part``: a split folder's own part is its top-level test files."""
        if part in SPLIT:
            return sorted(f"tests/{part}/{f.name}" for f in (self.root / "tests" / part).glob("test_*.py"))
        return [f"tests/{part}" + ("" if part.endswith(".py") else "/")]

    def _run(self, part: str) -> None:
        targets = self._targets(part)
        with tempfile.TemporaryFile() as out:
            start = time.monotonic()
            child = subprocess.Popen(  # its own process group: a stop reaches the services it started
                [sys.executable, "-m", "pytest", *targets, *self.pytest_args],
                cwd=self.root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            with self.lock:
                self.children.add(child)
            code = child.wait()
            seconds = time.monotonic() - start
            with self.lock:
                self.children.discard(child)
            out.seek(0)
            log = out.read().decode(errors="replace")
        with self.lock:
            sys.stdout.write(f"== tests/{part} (exit {code}, {seconds:.0f} s)\n{log}")
            sys.stdout.flush()
            self.outcomes.append(Outcome(part, code, seconds, _summary(log)))

    def _lane(self) -> None:
        while (part := self._next()) is not None:
            self._run(part)

    def stop(self) -> None:
        """Start no more parts and end the running ones (with the processes they started)."""
        with self.lock:
            self.stopping = True
            children = list(self.children)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)

    def run(self) -> int:
        lanes = [threading.Thread(target=self._lane, daemon=True) for _ in range(min(self.jobs, len(self.queue)))]
        started = time.monotonic()
        for lane in lanes:
            lane.start()
        try:
            for lane in lanes:
                while lane.is_alive():
                    lane.join(0.5)
        except KeyboardInterrupt:
            self.stop()
            for lane in lanes:
                lane.join()
            print("stopped: the running parts were ended", file=sys.stderr)
            return 130
        wall = time.monotonic() - started
        print(f"\n== {len(self.outcomes)} parts in {wall:.0f} s wall, {self.jobs} at a time")
        for o in sorted(self.outcomes, key=lambda o: -o.seconds):
            mark = "ok  " if o.returncode == 0 else "FAIL"
            print(f"  {mark} {o.part:<26} {o.seconds:>6.0f} s  {o.summary}")
        failed = [o for o in self.outcomes if o.returncode != 0]
        return failed[0].returncode if failed else 0


def select(known: list[str], asked: list[str]) -> list[str]:
    """The parts of ``known`` that ``asked`` names (all when it names none); a split folder's name stands for all of
    its parts. Raises ``LookupError`` naming what matches no part."""
    names = {q.rstrip("/") for q in asked}

    def wanted(part: str, name: str) -> bool:
        return part == name or part.startswith(name + "/")

    unknown = sorted(q for q in names if not any(wanted(p, q) for p in known))
    if unknown:
        raise LookupError(", ".join(unknown))
    return [p for p in known if any(wanted(p, q) for q in names)] if names else known


def _default_jobs() -> int:
    env = os.environ.get("TEST_JOBS", "")
    if env:
        if not env.isdigit() or int(env) < 1:
            raise SystemExit(f"TEST_JOBS must be a whole number >= 1, got {env!r}")
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--jobs", "-j", type=int, default=None, help="parts run at a time (default: CPUs, $TEST_JOBS)")
    ap.add_argument("parts", nargs="*", help="parts to run (default: all), e.g. collector test_readme.py")
    args, pytest_args = ap.parse_known_args(argv)
    known = discover()
    try:
        parts = select(known, args.parts)
    except LookupError as e:
        print(f"no such part: {e.args[0]}; the parts are {', '.join(known)}", file=sys.stderr)
        return 2
    jobs = args.jobs if args.jobs is not None else _default_jobs()
    if jobs < 1:
        print(f"--jobs must be >= 1, got {jobs}", file=sys.stderr)
        return 2
    return Runner(parts, jobs, pytest_args).run()


if __name__ == "__main__":
    sys.exit(main())
