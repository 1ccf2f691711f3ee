"""How far correct float32 backwards are from the float64 twin, against the float32 tolerances.

Draws N float32 cases (seeded fast path, the full mix with float32 on; no in-place ops, which
PyTorch refuses on leaves), runs each backend on the case and the reference on its float64 twin
(`Case.widened`), and measures every gradient's error: relative to the gradient's largest element
where that is at least 0.1, absolute where it is smaller (a cancellation's residue). Prints, per
backend, the worst of each and its ratio to the tolerance (the margin: how far below it correct
answers stay), the worst ratio of its error to the reference's own float32 error (the margin
under CONDITION, which widens a case's tolerances: `oracles.float32_tolerance`), the false
alarms (a case a correct backend fails: any failure of the reference and
JAX, and of PyTorch outside its known second-order defect; order 1 only here), and how many of the
same answers made 1% wrong the oracles catch.

    python bench/float32_errors.py [--backends reference,torch,jax] [--cases 500]
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from gradcert.backends import ReferenceBackend, resolve
from gradcert.backends.protocol import TOLERANCES, BackendResult, Unsupported
from gradcert.conformance.oracles import CONDITION, float32_tolerance, judge
from gradcert.generators import FULL, Features, draw_case

F32 = Features(FULL.enabled - {"inplace"}, required=frozenset({"float32"}))


def measure(name: str, cases: int) -> None:
    backend = resolve(name, "cpu")
    twin = ReferenceBackend(listing=False)
    worst_rel = worst_abs = worst_ratio = 0.0
    verdicts: Counter[str] = Counter()
    caught = wrong = 0
    for seed in range(cases):
        case = draw_case(seed, F32)
        try:
            got = backend.run(case)
        except Unsupported:
            verdicts["unsupported"] += 1
            continue
        want = twin.run(case.widened())
        own = twin.run(case)  # the reference's own float32 run
        tol = float32_tolerance(own, want) if name != "reference" else None  # (as a session judges)
        for g, r, o in zip(got.grads, want.grads, own.grads):
            if g is None or r is None or not r.size:
                continue
            err, scale = float(np.max(np.abs(g - r))), float(np.max(np.abs(r)))
            if scale >= 0.1:
                worst_rel = max(worst_rel, err / scale)
            else:
                worst_abs = max(worst_abs, err)
            if o is not None and err > 1e-7:  # (below: both at the unit roundoff)
                worst_ratio = max(worst_ratio, err / max(float(np.max(np.abs(o - r))), 1e-9))
        v = judge(case, got, want, tol=tol)
        verdicts[v.status] += 1
        if v.status == "fail":
            print(f"  {name} seed {seed}: {v.oracle}: {v.message[:160]}")
        if v.status == "pass" and any(g is not None and np.abs(g).max() >= 0.1 for g in got.grads):
            off = [None if g is None else (g * np.float32(1.01)).astype(g.dtype) for g in got.grads]
            wrong += 1
            caught += judge(case, BackendResult(off, forward=got.forward), want, tol=tol).status == "fail"
    print(f"{name}: {cases} float32 cases: " + ", ".join(f"{k} {n}" for k, n in sorted(verdicts.items())))
    base = TOLERANCES["f32"]
    ratio_rel = base.ref_rtol / max(worst_rel, 1e-30)
    ratio_abs = base.ref_atol / max(worst_abs, 1e-30)
    print(f"worst relative error, {name}: {worst_rel:.2e}; ratio F32_RTOL / it: {ratio_rel:.0f}")
    print(f"worst absolute error of a small gradient, {name}: {worst_abs:.2e}; ratio F32_ATOL / it: {ratio_abs:.0f}")
    if name != "reference":  # (the reference's own run is what is measured there)
        print(f"worst error / the reference's own float32 error, {name}: {worst_ratio:.1f} (CONDITION {CONDITION})")
    print(f"false alarms, {name}: {verdicts['fail'] + verdicts['error']}")
    print(f"1% wrong gradients caught, {name}: {caught}/{wrong}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="reference,torch,jax")
    ap.add_argument("--cases", type=int, default=500)
    args = ap.parse_args()
    for name in args.backends.split(","):
        measure(name, args.cases)


if __name__ == "__main__":
    main()
