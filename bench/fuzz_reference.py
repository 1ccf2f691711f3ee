"""Fuzz the reference backend with the seeded fast path: N cases drawn from the full mix (and as
second-order cases where they can be), each judged by every oracle. Prints the verdict counts, the
false-alarm count (any failure is one: the reference is correct by construction of this test) and
the invalid rate, last.

    python bench/fuzz_reference.py [--cases 10000] [--start 0]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from gradcert.conformance.areas import AREAS
from gradcert.conformance.session import Session
from gradcert.generators import draw_case


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    s = Session("reference", None, "reports/findings")
    counts: Counter[str] = Counter()
    oracles: Counter[str] = Counter()
    t = time.perf_counter()
    for seed in range(args.start, args.start + args.cases):
        case = draw_case(seed)
        v = s.judge(AREAS["cotangents" if case.cotangents is not None else "elementwise"], case)
        counts[v.status] += 1
        if v.status != "pass":
            oracles[f"{v.status}:{v.oracle}"] += 1
            if v.status == "fail":
                print(f"seed {seed}: {v.oracle}: {v.message}")
    dt = time.perf_counter() - t
    n = args.cases
    print(
        f"{n} cases in {dt:.0f} s ({n / dt:.0f} cases/s): " + ", ".join(f"{k} {c}" for k, c in sorted(counts.items()))
    )
    print("non-pass by oracle:", dict(oracles))
    print(
        f"false alarms: {counts['fail'] + counts['error']}; invalid rate: {100 * counts['invalid'] / n:.2f}% "
        "(target < 1%)"
    )


if __name__ == "__main__":
    main()
