"""Cost of the backward transform as programs grow: time per op of the reference `grad()` and of
Paddle's `paddle.autograd.ir_backward.grad` on the same programs (lowered to PIR by the paddle
backend's lowering; only the `grad()` call is timed), from 100 to 12,800 ops, for chains and for
random programs (fan-out, in-place ops, ifs and loops). Prints the time per op at each size and,
last, the ratio of the largest size's to the smallest's for each (target for the reference: <= 2,
i.e. linear cost), and Paddle's time over the reference's at the largest size.

    python bench/backward_scaling.py [--sizes 100,200,...] [--repeat 3] [--no-paddle]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from typing import Any

from gradcert.reference import ProgramBuilder, f64
from gradcert.reference.autodiff.backward import grad
from gradcert.reference.ir import Program

UNARY = ["tanh", "sin", "cos", "exp", "sigmoid", "square", "neg", "abs"]
BINARY = ["add", "subtract", "multiply", "maximum"]


def chain(n: int) -> tuple[Program, list]:  # type: ignore[type-arg]
    pb = ProgramBuilder()
    x = pb.input("x", f64(4))
    v = x
    for i in range(n):
        v = pb.emit(UNARY[i % len(UNARY)], v)
    return pb.build(pb.sum(v)), [x]


def random_program(n: int, seed: int = 0) -> tuple[Program, list]:  # type: ignore[type-arg]
    rng = random.Random(seed)
    pb = ProgramBuilder()
    xs = [pb.input(f"x{i}", f64(4)) for i in range(4)]
    pool = list(xs)
    count = 0
    while count < n:
        r = rng.random()
        recent = pool[-8:]
        if r < 0.45:
            pool.append(pb.emit(rng.choice(UNARY), rng.choice(recent)))
            count += 1
        elif r < 0.85:
            pool.append(pb.emit(rng.choice(BINARY), rng.choice(recent), rng.choice(pool)))
            count += 1
        elif r < 0.93:
            fresh = pb.exp(rng.choice(recent))
            pool.append(pb.tanh_(fresh))  # the in-place op consumes a value nothing else reads
            count += 2
        elif r < 0.97:
            a, b = rng.choice(recent), rng.choice(pool)
            c = pb.greater_than(pb.sum(a), pb.const(-1e9))
            (y,) = pb.if_(c, lambda bb: [bb.multiply(a, b)], lambda bb: [bb.sin(a)])
            pool.append(y)
            count += 6
        else:
            a, w = rng.choice(recent), rng.choice(pool)
            lim = pb.const(2, dtype="i64")
            _, h = pb.while_(
                [pb.const(0, dtype="i64"), a],
                lambda bb, i, h: bb.less_than(i, lim),
                lambda bb, i, h: [bb.add(i, bb.const(1, dtype="i64")), bb.tanh(bb.multiply(h, w))],
            )
            pool.append(h)
            count += 10
    outs = [pb.sum(v) for v in pool[-3:]]
    return pb.build(*outs), xs


def time_grad(make, n: int, repeat: int) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        p, xs = make(n)
        size = sum(1 for _ in p.walk())
        t = time.perf_counter()
        grad(p, p.outputs, xs)
        best = min(best, time.perf_counter() - t)
    return best, size


def paddle_grad(program: Program, inputs: list) -> float:  # type: ignore[type-arg]
    """Seconds of Paddle's `ir_backward.grad` on `program` lowered to a PIR program."""
    import paddle
    from paddle.autograd.ir_backward import grad as pd_grad

    from gradcert.backends.paddle import TABLE, _PaddleLowering

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        low = _PaddleLowering("paddle", TABLE, paddle)
        xs: list[Any] = []
        for k, v in enumerate(program.inputs):
            d = paddle.static.data(f"x{k}", list(v.type.shape), "float64")  # type: ignore[union-attr]
            d.stop_gradient = False
            xs.append(d)
        low.run_block(program.block, xs)
        outs = [low.env[v] for v in program.outputs]
        wrt = [xs[program.inputs.index(v)] for v in inputs]
        t = time.perf_counter()
        pd_grad(outs, wrt)
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,200,400,800,1600,3200,6400,12800")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-paddle", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = ["reference"] if args.no_paddle else ["reference", "paddle"]
    if "paddle" in backends:
        import paddle

        paddle.enable_static()
        paddle_grad(*chain(10))  # the first grad() in a process pays for setting up
    print(f"{'program':>8} {'ops':>7} " + " ".join(f"{b + ' s':>12} {b + ' us/op':>14}" for b in backends), flush=True)
    ratios: dict[str, float] = {}
    largest: dict[str, float] = {}
    for label, make in (("chain", chain), ("random", random_program)):
        per_op: dict[str, list[float]] = {b: [] for b in backends}
        for n in sizes:
            t, size = time_grad(make, n, args.repeat)
            cells = {"reference": t}
            if "paddle" in backends:
                cells["paddle"] = paddle_grad(*make(n))  # once: Paddle's grad() is slow at large sizes
            for b, dt in cells.items():
                per_op[b].append(dt / size)
            largest[label] = cells.get("paddle", 0.0) / cells["reference"]
            print(
                f"{label:>8} {size:7d} "
                + " ".join(f"{cells[b]:12.4f} {1e6 * cells[b] / size:14.2f}" for b in backends),
                flush=True,
            )
        for b in backends:
            ratios[f"{b} {label}"] = per_op[b][-1] / per_op[b][0]
    for key, r in ratios.items():
        target = " (target <= 2)" if key.startswith("reference") else ""
        print(f"ratio time/op {key} {sizes[-1]} vs {sizes[0]} ops: {r:.2f}{target}")
    if "paddle" in backends:
        for label, r in largest.items():
            print(f"ratio Paddle grad() / reference grad() at {sizes[-1]} ops, {label}: {r:.1f}")
    sys.stdout.flush()
    os._exit(0)  # Paddle's native code can abort at interpreter exit, after the results


if __name__ == "__main__":
    main()
