"""Generator throughput and coverage.

Draws per second for the hypothesis strategy and for the seeded fast path (the same
construction), then, over the N cases a derandomized certify run draws (`judging.drawn`: N / 43 per
test; the certify profile is 10,750): verifier errors, draws with a non-finite forward value or
reference gradient, how often each op, construct and feature appears, and the interaction
coverage (`generators/coverage.py`): the share of reachable pairs hit, and every pair not hit.
Ratios last.

    python bench/generation.py [--draws 10750]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings

from gradcert.conformance.areas import tests
from gradcert.conformance.judging import drawn
from gradcert.generators import Case, cases, describe, draw_case
from gradcert.generators.coverage import REACHABLE, Tally, unreachable_pairs
from gradcert.generators.features import ALL
from gradcert.reference import run
from gradcert.reference.autodiff.gradients import compute
from gradcert.reference.ir.verifier import verify_all


def hypothesis_rate(n: int) -> float:
    count = 0

    @given(cases())
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def draw(case: Case) -> None:
        nonlocal count
        count += 1

    t = time.perf_counter()
    draw()
    return count / (time.perf_counter() - t)


def fast_rate(n: int) -> float:
    t = time.perf_counter()
    for seed in range(n):
        draw_case(seed)
    return n / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=10_750)
    args = ap.parse_args()
    hyp, fast = hypothesis_rate(300), fast_rate(1000)
    print(f"draws/s: hypothesis {hyp:.0f}, fast path {fast:.0f}")

    features: Counter[str] = Counter()
    ops: Counter[str] = Counter()
    bad_verify = nonfinite = 0
    tally = Tally()
    per_test = max(1, -(-args.draws // len(tests())))
    for c in drawn(per_test):
        tally.add(c)
        bad_verify += bool(verify_all(c.program))
        outs = run(c.program, c.inputs).outputs
        g = compute(c.program, c.inputs, c.output_values, c.wrt_values, c.cotangents, c.no_grad)
        arrays = [np.asarray(o) for o in outs] + [x for x in g.grads if x is not None]
        nonfinite += not all(np.all(np.isfinite(a)) for a in arrays)
        features.update(describe(c))
        ops.update({op.name for op in c.program.walk()})
    n = tally.cases
    print(
        f"\n{n} draws of a certify run ({per_test} per test): "
        f"{bad_verify} verifier errors, {nonfinite} with non-finite values"
    )
    print("\nfeature        share of draws")
    for f in sorted(ALL):
        print(f"  {f:14s} {100 * features[f] / n:5.1f}%")
    print("\nop             share of draws")
    for name, k in sorted(ops.items(), key=lambda kv: -kv[1]):
        print(f"  {name:20s} {100 * k / n:5.1f}%")
    never = unreachable_pairs()
    print(f"\ninteraction coverage ({len(REACHABLE)} reachable pairs; {len(never)} unreachable by construction):")
    for why in sorted(set(never.values())):
        print(f"  unreachable: {why} ({sum(1 for w in never.values() if w == why)} pairs)")
    for a, b in tally.missing():
        print(f"  not hit: {a} & {b}")
    low = min(features[f] / n for f in ALL)
    print(f"\nratio fast path / hypothesis draws per second: {fast / hyp:.1f}")
    print(f"least covered feature: {100 * low:.1f}% of draws (target >= 5%)")
    print(f"pair coverage: {100 * tally.share():.1f}% of reachable pairs (target >= 99%)")


if __name__ == "__main__":
    main()
