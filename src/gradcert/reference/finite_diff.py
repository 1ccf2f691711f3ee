"""Finite differences on the reference interpreter, in float64.

Directional: for a direction `v` over the inputs and cotangents `u` over the outputs, the
derivative at t = 0 of f(t) = sum_k <u_k, y_k(x + t v)> by central differences with one step of
Richardson extrapolation, (4 D(h/2) - D(h)) / 3 with D(h) = (f(h) - f(-h)) / 2h: four forward
runs whatever the input size, truncation error O(h^4). Values that stop gradient (or are in the
no-grad set) are held at their unperturbed values: they are constants to the derivative. Every
perturbed run must take the same smooth piece of the program as the unperturbed one (equal
traces: same branches, trip counts and kink sides), else the estimate is not valid.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcert.reference.interpreter import Evaluation, Interpreter, to_numpy
from gradcert.reference.ir import Program, Value

# h relative to the input scale: with Richardson the truncation error is ~h^4 |f^(5)| and the
# rounding error ~eps |f| / h; h = 1e-3 puts both near 1e-12 for the O(1) values generators draw.
STEP = 1e-3


@dataclass
class Directional:
    value: float  # d/dt f(x + t v) at 0
    valid: bool  # every perturbed run had the unperturbed trace
    runs: int


def _f(outs: Sequence[Any], cots: Sequence[np.ndarray | None]) -> float:
    return float(
        sum(
            np.vdot(np.asarray(u, dtype=np.float64), to_numpy(y).astype(np.float64, copy=False))
            for u, y in zip(cots, outs)
            if u is not None  # (an output not differentiated)
        )
    )


def held_values(program: Program, no_grad: Iterable[Value] = ()) -> frozenset[Value]:
    """Values inside the program that are constants to the derivative."""
    held = set(no_grad) - set(program.inputs)
    for op in program.walk():
        held.update(r for r in op.results if r.stop_gradient)
        for b in op.blocks:
            held.update(a for a in b.args if a.stop_gradient)
    return frozenset(held)


@dataclass
class Base:
    """What finite differences need of the unperturbed run: its trace, and every computation of
    each held value (perturbed runs take these in their place)."""

    trace: list[tuple[Any, Any]]
    held: dict[Value, list[Any]]


def unperturbed(
    program: Program,
    inputs: Sequence[np.ndarray],
    held: frozenset[Value],
    ran: Evaluation | None = None,
    xp: Any = np,
) -> Base:
    """The unperturbed run on the array namespace `xp`: taken from `ran` (a NumPy run of the same
    program at the same inputs that kept every held value), else made."""
    if xp is np and ran is not None and ran.of(program, inputs) and held <= ran.values.keys():
        return Base(ran.trace, {v: [ran.values[v]] for v in held})
    r = Interpreter(xp, keep=held)
    return Base(r.run(program, inputs).trace, r.kept)


def directional(
    program: Program,
    inputs: Sequence[np.ndarray],
    direction: Sequence[np.ndarray | None],
    cotangents: Sequence[np.ndarray | None],
    held: frozenset[Value] = frozenset(),
    step: float = STEP,
    base: Base | None = None,
    xp: Any = np,
) -> Directional:
    """The directional derivative, the program run on the array namespace `xp` (inputs, direction
    and cotangents on the host); `direction[i]` None leaves input i unperturbed. `base`: the
    unperturbed run (on `xp`), where it was made already (`unperturbed`)."""
    base = base or unperturbed(program, inputs, held, xp=xp)
    valid = True

    def f(t: float) -> float:
        nonlocal valid
        xs = [x if d is None else x + t * d for x, d in zip(inputs, direction)]
        r = Interpreter(xp, frozen=base.held).run(program, xs)
        valid = valid and _same_trace(r.trace, base.trace)
        return _f(r.outputs, cotangents)

    def D(h: float) -> float:
        return (f(h) - f(-h)) / (2 * h)

    value = (4 * D(step / 2) - D(step)) / 3
    return Directional(value, valid, 5)


def _same_trace(a: list[tuple[Any, Any]], b: list[tuple[Any, Any]]) -> bool:
    return len(a) == len(b) and all(x[0] is y[0] and x[1] == y[1] for x, y in zip(a, b))


def jacobian_vjp(
    program: Program,
    inputs: Sequence[np.ndarray],
    wrt: Sequence[int],
    cotangents: Sequence[np.ndarray | None],
    held: frozenset[Value] = frozenset(),
    step: float = STEP,
    base: Base | None = None,
    xp: Any = np,
) -> tuple[list[np.ndarray], bool]:
    """Exhaustive mode: every element of the vector-Jacobian product, one direction per input
    element. Returns the gradients of inputs `wrt` and whether every estimate was valid."""
    base = base or unperturbed(program, inputs, held, xp=xp)  # (one for every direction)
    grads, valid = [], True
    for i in wrt:
        x = np.asarray(inputs[i], dtype=np.float64)
        g = np.zeros(x.shape)
        for idx in np.ndindex(*x.shape):
            e = np.zeros(x.shape)
            e[idx] = 1.0
            d = directional(
                program, inputs, [e if k == i else None for k in range(len(inputs))], cotangents, held, step, base, xp
            )
            g[idx] = d.value
            valid = valid and d.valid
        grads.append(g)
    return grads, valid
