"""Cost of the reference backward as programs grow: time per op of `grad()` from 100 to 12,800
ops, for chains and for random programs (fan-out, broadcasting, in-place ops, ifs and loops).
Prints the time per op at each size and, last, the ratio of the largest size's to the smallest's
(target: <= 2, i.e. linear cost).

    python bench/backward_scaling.py [--sizes 100,200,...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import time

from gradcert.reference import ProgramBuilder, f64
from gradcert.reference.backward import grad
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,200,400,800,1600,3200,6400,12800")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'program':>8} {'ops':>7} {'grad() s':>10} {'us/op':>8}")
    ratios = {}
    for label, make in (("chain", chain), ("random", random_program)):
        per_op = []
        for n in sizes:
            t, size = time_grad(make, n, args.repeat)
            per_op.append(t / size)
            print(f"{label:>8} {size:7d} {t:10.4f} {1e6 * t / size:8.2f}")
        ratios[label] = per_op[-1] / per_op[0]
    for label, r in ratios.items():
        print(f"ratio time/op {label} {sizes[-1]} vs {sizes[0]} ops: {r:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
