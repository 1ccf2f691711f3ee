"""The `gradcert` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from .reference.backward import BackwardError, grad
from .reference.domains import safe_inputs
from .reference.finite_diff import held_values, jacobian_vjp
from .reference.interpreter import Interpreter, InterpreterError, namespace, to_numpy
from .reference.loader import ProgramFileError, load_program
from .reference.text import print_program
from .reference.types import is_differentiable

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _fmt(x: np.ndarray) -> str:
    return np.array2string(np.asarray(x), precision=6, separator=", ", threshold=20)


def cmd_show(args: argparse.Namespace) -> int:
    xp = namespace(args.device)
    for path in args.files:
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
    return EXIT_OK


def show_grad(program: object, xs: list[np.ndarray], xp: object) -> None:
    from .reference.ir import Program

    assert isinstance(program, Program)
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
    got = iter(Interpreter(xp).run(program, [xp.asarray(x) for x in xs], fetch=fetch).outputs)  # type: ignore[attr-defined]
    print("gradients (finite differences" + ("" if valid else ", NOT VALID: a branch or kink flipped") + "):")
    for i, gv, e in zip(wrt, g.grads, expect):
        name = program.inputs[i].name
        if gv is None:
            print(f"  %{name}: None   fd: {_fmt(e)}")
            continue
        val = to_numpy(next(got))
        err = float(np.max(np.abs(val - e))) if val.size else 0.0
        print(f"  %{name}: {_fmt(val)}   fd: {_fmt(e)}   max abs err {err:.2e}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gradcert", description="Certify reverse-mode differentiation.")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="parse, verify, print and run program files")
    show.add_argument("files", nargs="+", metavar="FILE")
    show.add_argument("--grad", action="store_true", help="also build and run the reference backward")
    show.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    show.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    show.set_defaults(func=cmd_show)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ProgramFileError, InterpreterError, BackwardError, ValueError) as e:
        print(f"gradcert: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
