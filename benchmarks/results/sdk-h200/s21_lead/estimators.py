"""Per-process estimators of the block protocol's cost, compared on the A/A control (session 21).

    python3 estimators.py call1_study_default.jsonl call2_study_default_pin12-13.jsonl

For each saved study (``STUDY_JSON`` lines of bench_sdk_study.py --blocks), per process and variant against
plain: the median of neighbouring-block ratios (the study's within-round figure), the ratio of the variants'
median, lower-quartile, lower-decile and minimum block times. The estimator whose A/A control (plain against
itself) spreads least across processes is the most precise one on that loan.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable


def load(path: str) -> list[dict]:
    with open(path) as fh:
        return [json.loads(line.split(" ", 1)[1]) for line in fh if line.startswith("STUDY_JSON")]


def quantile(values: list[float], f: float) -> float:
    v = sorted(values)
    i = f * (len(v) - 1)
    lo = int(i)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (i - lo)


ESTIMATORS: dict[str, Callable[[list[float], list[float]], float]] = {
    "pairmed": lambda a, b: statistics.median([x / y for x, y in zip(a, b, strict=True)]),
    "medratio": lambda a, b: statistics.median(a) / statistics.median(b),
    "q25ratio": lambda a, b: quantile(a, 0.25) / quantile(b, 0.25),
    "q10ratio": lambda a, b: quantile(a, 0.10) / quantile(b, 0.10),
    "minratio": lambda a, b: min(a) / min(b),
}


def main() -> None:
    for path in sys.argv[1:]:
        rows = load(path)
        print(path, len(rows), "processes")
        for name, estimate in ESTIMATORS.items():
            parts = []
            for variant in ("plain_aa", "instr_nofp", "instr"):
                vals = []
                for r in rows:
                    blocks = r.get("throughput", {}).get("blocks") or r["blocks"]
                    a = [u for rnd in blocks[variant] for u in rnd]
                    b = [u for rnd in blocks["plain"] for u in rnd]
                    vals.append((estimate(a, b) - 1) * 100)
                vals.sort()
                above = sum(v > 2 for v in vals)
                med = statistics.median(vals)
                parts.append(f"{variant}: med {med:+.2f} range {vals[0]:+.2f}..{vals[-1]:+.2f} >2: {above}")
            print(f"  {name:9s}", " | ".join(parts))


if __name__ == "__main__":
    main()
