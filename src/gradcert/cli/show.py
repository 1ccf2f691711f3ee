"""`gradcert show`: parse, verify, print and run program and case files (with `--grad`, the
reference backward beside finite differences)."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from gradcert.generators.case import load_case
from gradcert.reference.autodiff.backward import grad
from gradcert.reference.domains import safe_inputs
from gradcert.reference.finite_diff import held_values, jacobian_vjp
from gradcert.reference.interpreter import Interpreter, namespace, to_numpy
from gradcert.reference.ir import Program
from gradcert.reference.ir.loader import load_program
from gradcert.reference.ir.printer import print_program
from gradcert.reference.ir.types import is_differentiable


def _fmt(x: np.ndarray) -> str:
    return np.array2string(np.asarray(x), precision=6, separator=", ", threshold=20)


def show(args: argparse.Namespace) -> None:
    xp = namespace(args.device)
    for path in args.files:
        if str(path).endswith(".case"):
            show_case(path)
            continue
        program = load_program(path)
        print(f"== {path}")
        print(print_program(program), end="")
        xs = safe_inputs(program, args.seed)
        print(f"inputs (seed {args.seed}):")
        for v, x in zip(program.inputs, xs):
            print(f"  %{v.name}: {v.type} = {_fmt(x)}")
        run = Interpreter(xp).run(program, [xp.asarray(x) for x in xs])
        print("outputs:")
        for k, (v, y) in enumerate(zip(program.outputs, run.outputs)):
            print(f"  #{k}: {v.type} = {_fmt(to_numpy(y))}")
        if args.grad:
            show_grad(program, xs, xp)
        print()


def show_grad(program: Program, xs: list[np.ndarray], xp: Any) -> None:
    """Build the reference backward, print it with origins, and compare with finite differences."""
    wrt = [i for i, v in enumerate(program.inputs) if is_differentiable(v.type) and not v.stop_gradient]
    outs = [v for v in program.outputs if is_differentiable(v.type)]
    base = Interpreter().run(program, xs)
    cots = [
        np.ones(np.shape(y)) if is_differentiable(v.type) else np.zeros(np.shape(y))
        for v, y in zip(program.outputs, base.outputs)
    ]
    expect, valid = jacobian_vjp(program, xs, wrt, cots, held_values(program))
    g = grad(program, outs, [program.inputs[i] for i in wrt])
    print("backward program:")
    print(print_program(program, origins=True), end="")
    fetch = [v for v in g.grads if v is not None]
    got = iter(Interpreter(xp).run(program, [xp.asarray(x) for x in xs], fetch=fetch).outputs)
    print("gradients (finite differences" + ("" if valid else ", NOT VALID: a branch or kink flipped") + "):")
    for i, gv, e in zip(wrt, g.grads, expect):
        name = program.inputs[i].name
        if gv is None:
            print(f"  %{name}: None   fd: {_fmt(e)}")
            continue
        val = to_numpy(next(got))
        err = float(np.max(np.abs(val - e))) if val.size else 0.0
        print(f"  %{name}: {_fmt(val)}   fd: {_fmt(e)}   max abs err {err:.2e}")


def show_case(path: str) -> None:
    case = load_case(path)
    print(f"== {path}")
    print(case.to_text(), end="")
    outs = Interpreter().run(case.program, case.inputs).outputs
    print("outputs:")
    for k, y in enumerate(outs):
        print(f"  #{k}: {_fmt(to_numpy(y))}")
    print()
