"""Create a store in an empty chDB database both ways and print the time each takes, with the ratio per round.

Usage: python benchmarks/bench_migrate.py [--rounds 10] [--dir DIR]

Each round creates two fresh databases in one chDB folder, in alternating order: one through ``Store.migrate``
(an empty database gets the latest schema in one pass, ``schema.migrator.create_fresh``) and one through every
migration in turn (``apply_migrations(..., fresh_in_one_pass=False)``, what ``migrate`` did before), and drops
both. Each line counts the statements each way ran and gives the median seconds with the spread over rounds (min,
max), and the per-round ratio (in turn / one pass): median and spread. Every test that needs a store creates one,
and ``inferensics init`` on a new store or cluster runs this path once; the machine's load shifts both ways alike
in a round.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from inferensics.schema.migrator import apply_migrations
from inferensics.schema.store import Store


def _counted(store: Store) -> list[int]:
    """Count the statements ``store``'s client runs from now on (commands, queries, inserts)."""
    calls = [0]
    client = store.client
    for name in ("command", "query", "insert"):
        original = getattr(client, name)

        def wrapped(*args: object, _original: Callable[..., object] = original, **kwargs: object) -> object:
            calls[0] += 1
            return _original(*args, **kwargs)

        setattr(client, name, wrapped)
    return calls


def _one(folder: Path, one_pass: bool) -> tuple[float, int]:
    store = Store.open(f"chdb://{folder}?database=b_{uuid.uuid4().hex[:12]}")
    try:
        calls = _counted(store)
        start = time.perf_counter()
        if one_pass:
            store.migrate()
        else:
            apply_migrations(store.client, store.target, fresh_in_one_pass=False)
        return time.perf_counter() - start, calls[0]
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
        store.close()


def _line(name: str, seconds: list[float], statements: int) -> str:
    return (
        f"{name:<14} {statements:>4} statements  median {statistics.median(seconds):.3f} s  "
        f"[{min(seconds):.3f}, {max(seconds):.3f}]"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--dir", type=Path, default=None, help="the chDB folder (default: a temporary one)")
    args = ap.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="bench-migrate-"))
    _one(folder, True)  # the engine's first DDL in this process (its own warm-up) is in neither figure
    fast: list[float] = []
    slow: list[float] = []
    counts = {True: 0, False: 0}
    for r in range(args.rounds):
        for one_pass in (True, False) if r % 2 == 0 else (False, True):
            seconds, counts[one_pass] = _one(folder, one_pass)
            (fast if one_pass else slow).append(seconds)
    ratios = [s / f for f, s in zip(fast, slow, strict=True)]
    print(f"{args.rounds} rounds, chDB folder {folder}")
    print(_line("one pass", fast, counts[True]))
    print(_line("in turn", slow, counts[False]))
    print(
        f"in turn / one pass, per round: median {statistics.median(ratios):.1f}x [{min(ratios):.1f}, {max(ratios):.1f}]"
    )


if __name__ == "__main__":
    main()
