"""How far correct float32 backwards are from the float64 twin, against the float32 tolerances.

Draws N float32 cases (seeded fast path, the full mix with float32 on; no in-place ops, which
PyTorch refuses on leaves), runs each backend on the case and the reference on its float64 twin
(`Case.widened`), and measures every gradient's error: relative to the gradient's largest element
where that is at least 0.1, absolute where it is smaller (a cancellation's residue). Prints, per
backend, the worst of each and its ratio to the tolerance (the margin: how far below it correct
answers stay), the false alarms (a case a correct backend fails: any failure of the reference and
JAX, and of PyTorch outside its known second-order defect; order 1 only here), and how many of the
same answers made 1% wrong the oracles catch.

    python bench/float32_errors.py [--backends reference,torch,jax] [--cases 500]
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from gradcert.conformance import BackendResult, ReferenceBackend, resolve
from gradcert.conformance.api import Unsupported
from gradcert.conformance.oracles import TOLERANCES, judge
from gradcert.generators import FULL, Features, draw_case

F32 = Features(FULL.enabled - {"inplace"}, required=frozenset({"float32"}))


def measure(name: str, cases: int) -> None:
    backend = resolve(name, "cpu")
    twin = ReferenceBackend(listing=False)
    tol = TOLERANCES["f32"]
    worst_rel = worst_abs = 0.0
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
        for g, r in zip(got.grads, want.grads):
            if g is None or r is None or not r.size:
                continue
            err, scale = float(np.max(np.abs(g - r))), float(np.max(np.abs(r)))
            if scale >= 0.1:
                worst_rel = max(worst_rel, err / scale)
            else:
                worst_abs = max(worst_abs, err)
        v = judge(case, got, want)
        verdicts[v.status] += 1
        if v.status == "fail":
            print(f"  {name} seed {seed}: {v.oracle}: {v.message[:160]}")
        if v.status == "pass" and any(g is not None and np.abs(g).max() >= 0.1 for g in got.grads):
            off = [None if g is None else (g * np.float32(1.01)).astype(g.dtype) for g in got.grads]
            wrong += 1
            caught += judge(case, BackendResult(off, forward=got.forward), want).status == "fail"
    print(f"{name}: {cases} float32 cases: " + ", ".join(f"{k} {n}" for k, n in sorted(verdicts.items())))
    ratio_rel = tol.ref_rtol / max(worst_rel, 1e-30)
    ratio_abs = tol.ref_atol / max(worst_abs, 1e-30)
    print(f"worst relative error, {name}: {worst_rel:.2e}; ratio F32_RTOL / it: {ratio_rel:.0f}")
    print(f"worst absolute error of a small gradient, {name}: {worst_abs:.2e}; ratio F32_ATOL / it: {ratio_abs:.0f}")
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
