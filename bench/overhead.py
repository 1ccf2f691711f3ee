"""Overhead of a check over its physical floor, per backend, and where the time goes.

The floor of one check: the backend alone computing one forward plus backward (no op listing, no
bookkeeping), plus the finite-difference oracle's forward runs on the reference interpreter (the
unperturbed run and four perturbed ones). gradcert's total: drawing the case (seeded fast path)
plus `Session.check` as `certify` runs it in a worker (backend, expected gradients, every oracle,
the verdict appended to a results file), in process. Each case is timed both ways, interleaved.

Breakdown of the total: generation, backend (as the session runs it: with the op listing and, for
Paddle, the check of the fetched forward), reference (the expected gradients; none when certifying
the reference itself), oracles, bookkeeping (the rest: case ids, results file, JSON).

Ratios last (target: <= 1.5 on the reference and paddle backends).

    python bench/overhead.py [--cases 300] [--backends reference,paddle]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from gradcert.conformance import session as session_module
from gradcert.conformance.areas import AREAS
from gradcert.conformance.backends import ReferenceBackend
from gradcert.conformance.session import Session
from gradcert.generators import Case, draw_case
from gradcert.generators.features import FULL
from gradcert.reference.finite_diff import directional, held_values
from gradcert.reference.interpreter import run


class Clock:
    """Seconds spent in wrapped callables, by label."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.spent[label] += time.perf_counter() - t

        return timed


@contextmanager
def instrumented(s: Session, clock: Clock) -> Iterator[None]:
    """Time the session's stages: its backend runner, the reference, the oracles."""
    saved = (s.runner.run, s.reference.run, session_module.judge)
    s.runner.run = clock.wrap("backend", s.runner.run)  # type: ignore[method-assign]
    s.reference.run = clock.wrap("reference", s.reference.run)  # type: ignore[method-assign]
    session_module.judge = clock.wrap("oracles", session_module.judge)
    try:
        yield
    finally:
        s.runner.run, s.reference.run, session_module.judge = saved  # type: ignore[method-assign]


def fd_runs(case: Case) -> None:
    """The finite-difference oracle's forward runs, alone."""
    p = case.program
    outs = run(p, case.inputs).outputs
    cots = [np.ones(np.shape(y)) for y in outs]
    rng = np.random.default_rng(0)
    direction = [rng.normal(size=np.shape(x)) if i in case.wrt else None for i, x in enumerate(case.inputs)]
    directional(p, case.inputs, direction, cots, held_values(p, case.no_grad))


def floor_backend(name: str) -> Callable[[Case], None]:
    if name == "reference":
        ref = ReferenceBackend(listing=False)
        return lambda case: (ref.run(case), None)[1]
    from gradcert.conformance.paddle_backend import PaddleBackend

    pd = PaddleBackend(listing=False)
    return lambda case: (pd._execute(pd._build(case, with_grad=True)), None)[1]


def measure(name: str, n: int) -> float:
    from gradcert.conformance.backends import resolve

    caps = resolve(name).capabilities
    feats = FULL.narrow(caps)
    with tempfile.TemporaryDirectory() as d:
        s = Session(name, Path(d) / "r.jsonl", Path(d) / "f", isolate=False)
        gc.freeze()  # as the plugin does once a worker's session is up
        floor = floor_backend(name)
        clock = Clock()
        totals, floors, gen = [], [], 0.0
        area = AREAS["elementwise"]
        for seed in range(-20, n):  # the first 20: warm-up (first calls of kernels), not timed
            t0 = time.perf_counter()
            case = draw_case(abs(seed) + (10**6 if seed < 0 else 0), feats)
            t1 = time.perf_counter()
            with instrumented(s, clock):
                try:
                    s.check(f"bench::{name}", area, case)
                except AssertionError:
                    pass  # a failing case (a Paddle finding) is a check too
            t2 = time.perf_counter()
            try:
                floor(case)
            except Exception:
                pass  # the backend raised: its time until then is its floor
            fd_runs(case)
            t3 = time.perf_counter()
            if seed < 0:
                clock.spent.clear()
                continue
            gen += t1 - t0
            totals.append(t2 - t0)
            floors.append(t3 - t2)
        s.close()
    total = sum(totals)
    parts = {"generation": gen, **clock.spent}
    parts["bookkeeping"] = total - sum(parts.values())
    print(
        f"{name}: {n} checks, mean {1e3 * statistics.fmean(totals):.2f} ms/check, "
        f"floor {1e3 * statistics.fmean(floors):.2f} ms"
    )
    print("  where the time goes: " + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in parts.items()))
    return total / sum(floors)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--backends", default="reference,paddle")
    args = ap.parse_args()
    ratios = {name: measure(name, args.cases) for name in args.backends.split(",")}
    for name, r in ratios.items():
        print(f"ratio total / floor per check, {name}: {r:.2f} (target <= 1.5)")
    sys.stdout.flush()
    os._exit(0)  # Paddle's native code can abort at interpreter exit, after the results


if __name__ == "__main__":
    main()
