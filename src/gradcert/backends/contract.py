"""Mapping an eager or functional framework's answer onto the contract's `None`.

The contract (Paddle's `grad`, the reference backward) returns `None` for an input with no
differentiable path to a requested output *in the program*: a static property. Frameworks report
it differently: PyTorch returns `None` only for an input with no path in the autograd graph of the
run (an input used only in the branch not taken gets `None`), and a zero tensor for a path through
an op whose derivative is zero (`sign`); JAX never returns `None`, only zeros. An adapter maps:

- no path in the program and the framework's gradient is `None` or all zeros: `None`;
- a path in the program and the framework returns `None`: zeros of the input's shape (the value
  oracles then judge whether zero is right);
- anything else is kept as the framework gave it -- a non-zero gradient where no path exists stays,
  for the semantics oracle to report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from gradcert.generators.case import Case
from gradcert.reference.autodiff.backward import blocked_values
from gradcert.reference.autodiff.gradients import first_order
from gradcert.reference.autodiff.prune import reachable
from gradcert.reference.ir import Program, Value

T = TypeVar("T")


def _paths(program: Program, outputs: Sequence[Value], wrt: Sequence[Value], no_grad: Sequence[Value]) -> list[bool]:
    blocked = blocked_values(program, no_grad)
    wanted = set(outputs)
    return [bool(wanted & reachable(program.block, [x], blocked)) for x in wrt]


def paths(case: Case, order: int | None = None) -> list[bool]:
    """For each input in `case.wrt`: whether a differentiable path in the program leads from it to
    a requested output; at order 2, to a (not None) first-order gradient of the reference's."""
    if (order or case.order) == 1:
        return _paths(case.program, case.output_values, case.wrt_values, case.no_grad)
    p, _ = first_order(case.program, case.output_values, case.wrt_values, case.cotangents, case.no_grad)
    return _paths(p, p.outputs, [p.inputs[i] for i in case.wrt], [])


def to_contract(
    grads: Sequence[T | None], has_path: Sequence[bool], zeros: Callable[[int], T], is_zero: Callable[[T], bool]
) -> list[T | None]:
    """The framework's gradients (arrays or tensors) mapped as the module docstring says;
    `zeros(k)` makes the k-th input's zero gradient."""
    out: list[T | None] = []
    for k, (g, path) in enumerate(zip(grads, has_path)):
        if not path and (g is None or is_zero(g)):
            out.append(None)
        elif g is None:
            out.append(zeros(k))
        else:
            out.append(g)
    return out


def free_to_contract(case: Case, free: Sequence[int], got: Sequence[Any], order: int) -> list[Any]:
    """One host gradient per `case.wrt` from a framework that differentiated only the positions
    `free` of it (`got`: one array or None each; the others get None), mapped as `to_contract`
    maps them."""
    full: list[Any] = [None] * len(case.wrt)
    for k, g in zip(free, got):
        full[k] = None if g is None else np.asarray(g)
    zeros: Callable[[int], Any] = lambda k: np.zeros_like(np.asarray(case.inputs[case.wrt[k]]), dtype=np.float64)
    return to_contract(full, paths(case, order), zeros, lambda g: not np.any(g != 0))


def second_order_to_contract(
    case: Case,
    free: Sequence[int],
    got: Sequence[Any],
    guess: Sequence[int],
    got2: Sequence[Any],
    again: Callable[[list[int]], tuple[Sequence[Any], Sequence[Any]]],
) -> tuple[list[Any], list[Any]]:
    """A second-order answer mapped onto the contract: (the gradients, the "forward" -- the
    first-order gradients that are not None, which the lowering oracle checks). The framework
    differentiated again the first-order gradients at `guess` (positions in `free`: those the
    program has a path from) and gave `got2`; where the first-order answer `got`, mapped, has its
    not-None gradients elsewhere (a gradient where the program has no path), `again(kept)`
    differentiates those instead and gives (gradients, first-order gradients kept). A count of
    `case.cotangents2` that does not fit them gives no gradients (the lowering oracle reports it)."""
    first = free_to_contract(case, free, got, 1)
    kept = [list(free).index(k) for k, g in enumerate(first) if g is not None]
    if case.cotangents2 is not None and len(case.cotangents2) != len(kept):
        return [None] * len(case.wrt), [np.asarray(got[j]) for j in kept]
    forward: Sequence[Any] = [got[j] for j in kept]
    if kept != list(guess):
        got2, forward = again(kept)
    return free_to_contract(case, free, got2, 2), [np.asarray(y) for y in forward]
