"""A third-party backend for gradcert: a tape-based reverse mode on NumPy, written for this example.

The "framework" under test is the small autodiff below: it runs a program's ops one by one,
recording each on a tape, then walks the tape backwards applying one vector-Jacobian product
(VJP) per op. The adapter part, what every backend writes, is `TapeBackend`: a name, a version,
the capabilities it declares, and `run(case)`, which returns one gradient (or None) per input the
case differentiates.

It declares no capability: it runs straight-line programs only, so gradcert draws no `if`,
`while`, in-place op or vector value for it and reports the areas that need them as unsupported.
An op it has no VJP for raises `Unsupported`, which gradcert counts as a failure (`refused`) in
an area the backend claims; that is how a missing rule shows up.

The forward kernels are gradcert's own op definitions (`OPS[name].kernel`, written against the
array API); the backward, the part certified, is this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradcert.backends.protocol import BackendResult, Unsupported
from gradcert.reference.ops import OPS

Attrs = dict[str, Any]
# vjp(g, operands, result, attrs) -> one cotangent (or None: no gradient) per operand
Rule = Callable[[np.ndarray, Sequence[np.ndarray], np.ndarray, Attrs], list[np.ndarray | None]]


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`g` summed back to `shape`, undoing broadcasting."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def binary(da: Callable[..., np.ndarray], db: Callable[..., np.ndarray]) -> Rule:
    """The VJP of a broadcasting binary op from its two partial derivatives (a, b, y) -> array."""

    def vjp(g: np.ndarray, x: Sequence[np.ndarray], y: np.ndarray, attrs: Attrs) -> list[np.ndarray | None]:
        a, b = x
        return [unbroadcast(g * da(a, b, y), a.shape), unbroadcast(g * db(a, b, y), b.shape)]

    return vjp


def unary(d: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Rule:
    """The VJP of an elementwise op from its derivative (x, y) -> array."""
    return lambda g, x, y, attrs: [g * d(x[0], y)]


def reduced(g: np.ndarray, x: np.ndarray, attrs: Attrs) -> np.ndarray:
    """A reduction's cotangent `g` spread back over the shape of its operand `x`."""
    axes = [a % x.ndim for a in attrs["axes"]] if attrs["axes"] else list(range(x.ndim))
    keep = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return np.broadcast_to(np.reshape(g, keep), x.shape)


def sliced_back(g: np.ndarray, x: np.ndarray, attrs: Attrs) -> np.ndarray:
    out = np.zeros(x.shape, g.dtype)
    index = [slice(None)] * x.ndim
    for ax, s, e in zip(attrs["axes"], attrs["starts"], attrs["ends"]):
        index[ax % x.ndim] = slice(s, e)
    out[tuple(index)] = g
    return out


def padded_back(g: np.ndarray, x: np.ndarray, attrs: Attrs) -> np.ndarray:
    return g[tuple(slice(lo, lo + d) for lo, d in zip(attrs["low"], x.shape))]


def swap(m: np.ndarray) -> np.ndarray:
    return np.swapaxes(m, -1, -2)


one = lambda a, b, y: np.ones_like(y)  # noqa: E731
NO_GRADIENT: Rule = lambda g, x, y, attrs: [None] * len(x)  # noqa: E731

VJPS: dict[str, Rule] = {
    "tanh": unary(lambda x, y: 1 - y * y),
    "sin": unary(lambda x, y: np.cos(x)),
    "cos": unary(lambda x, y: -np.sin(x)),
    "exp": unary(lambda x, y: y),
    "log": unary(lambda x, y: 1 / x),
    "sigmoid": unary(lambda x, y: y * (1 - y)),
    "relu": unary(lambda x, y: (x > 0).astype(x.dtype)),
    "abs": unary(lambda x, y: np.sign(x)),
    "sqrt": unary(lambda x, y: 0.5 / y),
    "square": unary(lambda x, y: 2 * x),
    "neg": unary(lambda x, y: -np.ones_like(x)),
    "reciprocal": unary(lambda x, y: -y * y),
    "scale": lambda g, x, y, attrs: [g * attrs["scale"]],
    "add": binary(one, one),
    "subtract": binary(one, lambda a, b, y: -np.ones_like(y)),
    "multiply": binary(lambda a, b, y: b, lambda a, b, y: a),
    "divide": binary(lambda a, b, y: 1 / b, lambda a, b, y: -y / b),
    "maximum": binary(lambda a, b, y: (a > b).astype(y.dtype), lambda a, b, y: (a <= b).astype(y.dtype)),
    "minimum": binary(lambda a, b, y: (a < b).astype(y.dtype), lambda a, b, y: (a >= b).astype(y.dtype)),
    "pow": binary(lambda a, b, y: b * a ** (b - 1), lambda a, b, y: y * np.log(a)),
    "sum": lambda g, x, y, attrs: [reduced(g, x[0], attrs)],
    "mean": lambda g, x, y, attrs: [reduced(g, x[0], attrs) * (g.size / x[0].size)],
    "matmul": lambda g, x, y, attrs: [
        unbroadcast(g @ swap(x[1]), x[0].shape),
        unbroadcast(swap(x[0]) @ g, x[1].shape),
    ],
    "reshape": lambda g, x, y, attrs: [np.reshape(g, x[0].shape)],
    "squeeze": lambda g, x, y, attrs: [np.reshape(g, x[0].shape)],
    "unsqueeze": lambda g, x, y, attrs: [np.reshape(g, x[0].shape)],
    "transpose": lambda g, x, y, attrs: [np.transpose(g, np.argsort(attrs["perm"]))],
    "expand": lambda g, x, y, attrs: [unbroadcast(g, x[0].shape)],
    "slice": lambda g, x, y, attrs: [sliced_back(g, x[0], attrs)],
    "pad": lambda g, x, y, attrs: [padded_back(g, x[0], attrs)],
    "cast": lambda g, x, y, attrs: [g.astype(x[0].dtype)],
    "assign": lambda g, x, y, attrs: [g],
    "where": lambda g, x, y, attrs: [
        None,
        unbroadcast(np.where(x[0], g, 0), x[1].shape),
        unbroadcast(np.where(x[0], 0, g), x[2].shape),
    ],
    # piecewise constant or not a function of its operands: no gradient flows through
    **dict.fromkeys(["sign", "full", "full_like", "less_than", "less_equal"], NO_GRADIENT),
    **dict.fromkeys(["greater_than", "greater_equal"], NO_GRADIENT),
}


def is_float(x: np.ndarray) -> bool:
    return bool(np.issubdtype(x.dtype, np.floating))


class TapeBackend:
    """gradcert's view of the tape autodiff above."""

    name = "tape"
    version = "tape-example 0.1.0"
    capabilities: frozenset[str] = frozenset()  # straight-line programs only

    def run(self, case: Any) -> BackendResult:
        program = case.program
        env: dict[Any, np.ndarray] = dict(zip(program.inputs, case.inputs))
        tape = []
        for op in program.block.ops:  # (no capability declared: no region op is ever drawn)
            if op.name not in VJPS:
                raise Unsupported(f"the tape backend has no rule for '{op.name}'")
            x = [env[v] for v in op.operands]
            env[op.results[0]] = np.asarray(OPS[op.name].kernel(np, *x, **op.attrs))
            tape.append(op)

        blocked = set(case.no_grad) | {v for v in env if v.stop_gradient}
        cts: dict[Any, np.ndarray] = {}

        def accumulate(v: Any, g: np.ndarray | None) -> None:
            if g is None or v in blocked or not is_float(env[v]):
                return
            cts[v] = cts[v] + g if v in cts else np.asarray(g, dtype=env[v].dtype)

        seeds = case.cotangents or [np.ones_like(env[v]) for v in case.output_values]
        for v, g in zip(case.output_values, seeds):
            if np.shape(g) != env[v].shape:  # a bad request is refused, never broadcast
                raise ValueError(f"cotangent of shape {list(np.shape(g))} for an output of shape {list(env[v].shape)}")
            accumulate(v, np.asarray(g))
        for op in reversed(tape):
            g = cts.get(op.results[0])
            if g is None:
                continue
            x = [env[v] for v in op.operands]
            for v, gx in zip(op.operands, VJPS[op.name](g, x, env[op.results[0]], op.attrs)):
                accumulate(v, gx)

        grads = [None if v not in cts else cts[v].astype(np.float64) for v in case.wrt_values]
        return BackendResult(grads, self.version, forward=[env[v] for v in program.outputs])
