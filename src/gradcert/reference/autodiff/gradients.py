"""Gradients as arrays: transform a copy of a program with the reference backward and run it."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcert.reference.autodiff.backward import Gradients, grad
from gradcert.reference.autodiff.invariants import Snapshot, snapshot
from gradcert.reference.interpreter import Interpreter, to_numpy
from gradcert.reference.ir import Program, Value, clone
from gradcert.reference.ir.types import TensorType


@dataclass
class Computed:
    grads: list[np.ndarray | None]
    transformed: Gradients
    outputs: list[np.ndarray]
    before: Snapshot | None  # the copy before the transform, for invariants.check (when asked for)


@dataclass(frozen=True)
class FirstOrder:
    """`first_order`'s answer to one request, and the request's objects (program, outputs, wrt,
    cotangents, no-grad set), to tell whether it answers another's (`of`)."""

    program: Program
    feeds: list[np.ndarray]
    request: tuple[object, ...]

    def of(self, *request: object) -> bool:
        return len(request) == len(self.request) and all(map(operator.is_, request, self.request))


_DTYPES = {"float64": "f64", "float32": "f32", "int64": "i64", "bool": "bool"}


def _type_of(x: Any) -> TensorType:
    a = np.asarray(x)
    return TensorType(tuple(a.shape), _DTYPES.get(str(a.dtype), "f64"))


def _cotangent_inputs(
    q: Program, n: int, cotangents: Sequence[np.ndarray | None] | None
) -> tuple[list[Value | None], list[np.ndarray]]:
    """Explicit cotangents as new inputs of `q` (None where defaulted), and the arrays to feed.
    Each is typed as given, so that a cotangent of the wrong shape is the backward's to refuse."""
    cots: list[Value | None] = []
    feeds: list[np.ndarray] = []
    for k, u in enumerate(cotangents or [None] * n):
        if u is None:
            cots.append(None)
        else:
            cots.append(add_input(q, f"__cotangent{k}", _type_of(u)))
            feeds.append(np.asarray(u))
    return cots, feeds


def add_input(program: Program, name: str, type: Any) -> Value:
    v = Value(type, name)
    v.owner = program.block
    program.block.args.append(v)
    return v


def compute(
    program: Program,
    inputs: Sequence[Any],
    outputs: Sequence[Value],
    wrt: Sequence[Value],
    cotangents: Sequence[np.ndarray | None] | None = None,
    no_grad: Sequence[Value] = (),
    xp: Any = np,
    checked: bool = False,
) -> Computed:
    """Gradients of sum <cotangents, outputs> w.r.t. `wrt` (values of `program`, left untouched).

    Explicit cotangents are fed as extra inputs of the transformed copy, as Paddle feeds them.
    `checked`: keep a snapshot of the copy before the transform, to check its invariants after."""
    q, m = clone(program)
    cots, extra = _cotangent_inputs(q, len(outputs), cotangents)
    feeds = [*inputs, *extra]
    before = snapshot(q) if checked else None
    g = grad(q, [m[y] for y in outputs], [m[w] for w in wrt], cots, [m[v] for v in no_grad])
    fetch = [v for v in g.grads if v is not None]
    r = Interpreter(xp).run(q, [xp.asarray(x) for x in feeds], fetch=[*fetch, *q.outputs])
    got = iter(to_numpy(a) for a in r.outputs[: len(fetch)])
    return Computed(
        [next(got) if v is not None else None for v in g.grads],
        g,
        [to_numpy(a) for a in r.outputs[len(fetch) :]],
        before,
    )


def first_order(
    program: Program,
    outputs: Sequence[Value],
    wrt: Sequence[Value],
    cotangents: Sequence[np.ndarray | None] | None = None,
    no_grad: Sequence[Value] = (),
) -> tuple[Program, list[np.ndarray]]:
    """A copy of `program` whose outputs are its (non-None) first-order gradients w.r.t. `wrt`.

    Explicit cotangents become extra inputs at the end (returned as arrays to feed); the inputs
    keep their positions. Differentiating the copy again gives second-order gradients."""
    q, m = clone(program)
    cots, feeds = _cotangent_inputs(q, len(outputs), cotangents)
    g = grad(q, [m[y] for y in outputs], [m[w] for w in wrt], cots, [m[v] for v in no_grad])
    q.outputs = [v for v in g.grads if v is not None]
    return q, feeds
