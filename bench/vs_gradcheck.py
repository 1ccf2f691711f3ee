"""Check cost: gradcert's check of the torch backend against `torch.autograd.gradcheck`.

1. The same drawn programs (seeded fast path, the features the torch backend supports, in-place
   ops left out since PyTorch refuses many of them, first order) checked three ways, interleaved
   case by case so that machine noise hits all three alike:
   - gradcert: one `Session.judge` on the torch backend, in process -- the backend's forward and
     backward, the reference backward, and every oracle (semantics, reference, invariants,
     directional finite differences);
   - `gradcheck(fast_mode=True)` and `gradcheck(fast_mode=False)` on the same lowered function.
2. Function evaluations (forward runs of the program, by whatever runs them) and time for one
   check of `y = sum(tanh(x) * x)` as the input grows from 10 to 10,000 elements.

Ratios last. Targets: gradcert <= 1x the fast mode's time per check; >= 10x faster than the full
mode at 1,000 input elements.

    python bench/vs_gradcheck.py [--programs 200] [--sizes 10,100,1000,10000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from gradcert.backends.torch import TorchBackend
from gradcert.conformance.areas import AREAS
from gradcert.conformance.session import Session
from gradcert.generators import Case, draw_case
from gradcert.generators.features import FULL
from gradcert.reference import interpreter
from gradcert.reference.ir.parser import parse_program
from gradcert.reference.ir.types import TensorType, is_differentiable


def torch_function(backend: TorchBackend, case: Case) -> tuple[Callable[..., Any], list[Any]]:
    """The case's program as a function of its differentiated inputs, for gradcheck."""
    leaves = backend.leaves(case)
    free = [i for i in case.wrt if leaves[i].requires_grad]

    def fn(*xs: Any) -> tuple[Any, ...]:
        args = list(leaves)
        for i, x in zip(free, xs):
            args[i] = x
        env = backend.lower(case, args)
        return tuple(env[v] for v in case.output_values)

    return fn, [leaves[i] for i in free]


def gradcheckable(case: Case) -> bool:
    outs = case.output_values
    return (
        case.order == 1
        and bool(case.wrt)
        and all(isinstance(v.type, TensorType) and is_differentiable(v.type) for v in outs)
        and not any(case.program.inputs[i].stop_gradient for i in case.wrt)
    )


def draw(n: int) -> list[Case]:
    feats = FULL.narrow(TorchBackend.capabilities).without("inplace")
    out, seed = [], 0
    while len(out) < n:
        c = draw_case(seed, feats)
        seed += 1
        if gradcheckable(c):
            out.append(c)
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, bool]:
    t = time.perf_counter()
    try:
        ok = fn() is not False
    except Exception:  # gradcheck raises on a mismatch (e.g. at a kink); still a check's cost
        ok = False
    return time.perf_counter() - t, ok


def compare_programs(n: int) -> dict[str, float]:
    backend = TorchBackend()
    session = Session("torch", None, tempfile.mkdtemp(), isolate=False)
    times: dict[str, list[float]] = {"gradcert": [], "fast": [], "full": []}
    failed = {k: 0 for k in times}
    cases = draw(n)
    # warm up over every program first: first calls (imports, a kernel's first use: torch's first
    # matmul takes 0.4 s) are not a check's cost, whichever check would meet them first
    for case in cases:
        fn, xs = torch_function(backend, case)
        timed(lambda: (session.judge(AREAS["elementwise"], case), torch.autograd.gradcheck(fn, xs)))
    for case in cases:
        fn, xs = torch_function(backend, case)
        for key, check in (
            ("gradcert", lambda: session.judge(AREAS["elementwise"], case).status in ("pass", "invalid")),
            ("fast", lambda: torch.autograd.gradcheck(fn, xs, fast_mode=True)),
            ("full", lambda: torch.autograd.gradcheck(fn, xs, fast_mode=False)),
        ):
            dt, ok = timed(check)
            times[key].append(dt)
            failed[key] += not ok
    print(f"{n} drawn programs (first order, torch-supported features without in-place):")
    for key, ts in times.items():
        print(
            f"  {key:>8}: mean {1e3 * statistics.fmean(ts):7.2f} ms/check, median "
            f"{1e3 * statistics.median(ts):7.2f} ms, {failed[key]} not passed"
        )
    return {k: statistics.fmean(v) for k, v in times.items()}


SCALING = """
program(%x: f64[N]) {
  %t = tanh(%x) : f64[N]
  %m = multiply(%t, %x) : f64[N]
  %y = sum(%m) {axes=[], keepdim=false} : f64[]
  return %y
}
"""


class Counted:
    """Counts calls of a function (the forward runs of a check)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.calls = fn, 0

    def __call__(self, *a: Any, **k: Any) -> Any:
        self.calls += 1
        return self.fn(*a, **k)


@contextmanager
def interpreter_runs() -> Iterator[Counted]:
    """Counts the reference interpreter's program runs (the oracles' forward runs)."""
    counter = Counted(interpreter.Interpreter.run)
    orig = interpreter.Interpreter.run
    interpreter.Interpreter.run = lambda self, *a, **k: counter(self, *a, **k)  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        interpreter.Interpreter.run = orig  # type: ignore[method-assign]


def scaling(sizes: list[int]) -> dict[int, dict[str, float]]:
    backend = TorchBackend()
    session = Session("torch", None, tempfile.mkdtemp(), isolate=False)
    print("one check of y = sum(tanh(x) * x) as x grows: forward runs of the program, and time")
    print(f"{'elements':>9} {'gradcert':>18} {'fast mode':>18} {'full mode':>18}")
    out: dict[int, dict[str, float]] = {}
    for n in sizes:
        p = parse_program(SCALING.replace("N", str(n)))
        rng = np.random.default_rng(n)
        case = Case(p, [rng.uniform(-1, 1, n)], [0], [0])
        row: dict[str, float] = {}
        cells = []
        # gradcert's forward runs: the backend's one, and the interpreter's (the reference
        # backward's run and the finite differences')
        with interpreter_runs() as counter:
            dt, ok = timed(lambda: session.judge(AREAS["elementwise"], case).status == "pass")
        assert ok, "gradcert's check of a correct gradient failed"
        row["gradcert"] = dt
        cells.append(f"{counter.calls + 1:6d} runs {1e3 * dt:7.1f} ms")
        for key, fast in (("fast", True), ("full", False)):
            fn, xs = torch_function(backend, case)
            counted = Counted(fn)
            dt, _ = timed(lambda: torch.autograd.gradcheck(counted, xs, fast_mode=fast))
            row[key] = dt
            cells.append(f"{counted.calls:6d} runs {1e3 * dt:7.1f} ms")
        out[n] = row
        print(f"{n:9d} " + " ".join(f"{c:>18}" for c in cells))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--sizes", default="10,100,1000,10000")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    mean = compare_programs(args.programs)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = scaling(sizes)
    print(
        f"ratio gradcert / gradcheck fast mode, time per check over {args.programs} programs: "
        f"{mean['gradcert'] / mean['fast']:.2f} (target <= 1)"
    )
    print(f"ratio gradcheck full mode / gradcert over {args.programs} programs: {mean['full'] / mean['gradcert']:.1f}")
    if 1000 in rows:
        r = rows[1000]
        print(f"ratio gradcheck full mode / gradcert at 1,000 elements: {r['full'] / r['gradcert']:.1f} (target >= 10)")


if __name__ == "__main__":
    main()
