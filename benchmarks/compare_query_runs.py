"""Pair the logs of interleaved ``bench_queries.py`` runs of two checkouts and print each query's ratio.

Usage: python benchmarks/compare_query_runs.py --base A1.log A2.log ... --new B1.log B2.log ...

Each log is the output of one ``bench_queries.py`` run (any checkout's version: only its result lines are
read, ``NAME  p50  p95  rows  load ...``, and the weekly report line). Round ``i`` pairs ``A_i`` with
``B_i`` (run one after the other, the order swapped between rounds, so that a change in the machine's load
falls on both). Per query it prints the median p50 of each side and the ratio new/base of the p50 per round
with its median and range; queries that only one side has are listed apart. Below 1 is faster.
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

_ROW = re.compile(r"^(?P<name>\S.*?)\s+(?P<p50>\d+\.\d)\s+(?P<p95>\d+\.\d)\s+(?P<rows>\d+)\s+load\b")
_WEEKLY = re.compile(r"^weekly report \S+: queries (?P<q>[\d.]+) s, with rendering (?P<r>[\d.]+) s")


def read_run(path: Path) -> dict[str, float]:
    """Query name → p50 ms of one run (the weekly report as two entries, in ms)."""
    out: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if m := _ROW.match(line):
            out[m["name"]] = float(m["p50"])
        elif m := _WEEKLY.match(line):
            out["weekly report: queries"] = float(m["q"]) * 1000
            out["weekly report: with rendering"] = float(m["r"]) * 1000
    if not out:
        raise SystemExit(f"{path}: no bench_queries.py result lines")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", nargs="+", type=Path, required=True, help="logs of the base checkout, one per round")
    ap.add_argument("--new", nargs="+", type=Path, required=True, help="logs of the new checkout, one per round")
    args = ap.parse_args()
    if len(args.base) != len(args.new):
        raise SystemExit(f"{len(args.base)} base logs but {len(args.new)} new logs: give one of each per round")
    base = [read_run(p) for p in args.base]
    new = [read_run(p) for p in args.new]
    names = [n for n in new[0] if all(n in r for r in base + new)]
    print(f"{len(base)} rounds; p50 ms, median over rounds; ratio new/base per round (below 1: faster)")
    print(f"{'query':52s} {'base':>9s} {'new':>9s}  ratio median (range)   per round")
    ratios_all = []
    for name in names:
        ratios = [n[name] / b[name] for b, n in zip(base, new, strict=True) if b[name] > 0]
        ratios_all += ratios
        mid = statistics.median(ratios) if ratios else float("nan")
        spread = f"({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "(no ratio)"
        b50, n50 = statistics.median(b[name] for b in base), statistics.median(n[name] for n in new)
        rounds = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"{name:52s} {b50:9.1f} {n50:9.1f}  {mid:5.2f} {spread:13s}  {rounds}")
    if ratios_all:
        print(f"all queries: median ratio {statistics.median(ratios_all):.2f} over {len(ratios_all)} pairs "
              f"(range {min(ratios_all):.2f}-{max(ratios_all):.2f})")  # fmt: skip
    only = sorted({n for r in base + new for n in r} - set(names))
    if only:
        print(f"not in every run of both sides (not compared): {', '.join(only)}")


if __name__ == "__main__":
    main()
