"""Drawing valid programs by construction.

One construction, fed by a `Chooser`: a seeded generator (how certify draws, and the fast path; it
keeps its choices as hypothesis records them) or hypothesis (which replays those choices and
shrinks them). Validity is built in, never filtered for:

- types check: partners of a binary op are drawn among values whose shapes broadcast;
- domains: an operand that an op's domain facts exclude goes through an adapter,
  `scale(sigmoid(v))` mapped into the domain's middle;
- magnitude: values are kept within |v| <= BOUND (a value that would leave it is squashed by tanh),
  so exp, products and sums stay finite and so do the gradients;
- kinks (`abs`, `relu`, `maximum`/`minimum`, comparisons): at the top level and in branches every
  value is computed as it is drawn, and a kink op is chosen only where every element keeps a
  distance >= MARGIN from its kink; `if` predicates keep the same margin;
- loop bodies are built on bounds rather than values (a trip's values are unknown while the body is
  drawn): they use kink-free ops with a known bound and end each carried value with a squashing op;
  predicates inside loops test the integer trip counter; a loop runs 0..8 trips, counted by an
  integer or decided by a float condition (a carried `t` in (0.1, 0.3) + 1 per trip against
  `trips - 0.5`: every comparison keeps a margin of 0.2), and nested loops share a budget of
  TRIP_BUDGET trips in all;
- in-place ops consume only a value of their own block, which then leaves the pool: it has no
  later use.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from gradcert.generators.case import Case, describe_program
from gradcert.generators.choices import Chooser
from gradcert.generators.features import Features
from gradcert.reference.interpreter import Evaluation, Interpreter
from gradcert.reference.ir import Block, Operation, Value
from gradcert.reference.ir.builder import Builder, ProgramBuilder
from gradcert.reference.ir.types import FLOAT_DTYPES, TensorType, is_differentiable, xp_dtype
from gradcert.reference.ops import OPS
from gradcert.reference.ops.base import broadcast_shapes

BOUND = 6.0
MARGIN = 0.05  # >> the finite-difference step (1e-3): no kink or branch flips under perturbation
SHAPES: list[tuple[int, ...]] = [(3,), (), (2, 3), (2, 1), (3, 2), (1, 3), (2, 1, 3), (1, 2, 1, 3)]
MAX_RANK = 4
MAX_TRIPS = 8
TRIP_BUDGET = 16  # the trips of nested loops, multiplied: bounds a case's run time
SQUASH = ["tanh", "sin", "sigmoid"]
UNARY = ["tanh", "sin", "cos", "exp", "sigmoid", "square", "neg", "scale", "log", "sqrt", "reciprocal", "abs", "relu"]
# The op-set extension (`along.py`, `indexing.py`, erf, gelu, clip): its elementwise ops and
# reductions join the unary and reduction steps where `along` is on (features.ALONE), so that
# the draws of the areas that do not name it stay as they were.
UNARY_MORE = ["erf", "gelu"]
BINARY = ["add", "multiply", "subtract", "divide", "maximum", "minimum", "pow"]
_UNARY_KINKS = [(n, OPS[n].drawing.kink) for n in UNARY]
_UNARY_MORE_KINKS = [(n, OPS[n].drawing.kink) for n in UNARY + UNARY_MORE]
_BINARY_KINKS = [(n, OPS[n].drawing.kink) for n in BINARY]
# a bound on |result| from bounds on the operands, for ops allowed in loop bodies
BODY_BOUND: dict[str, Callable[[list[float], dict[str, Any]], float]] = {
    "tanh": lambda a, attrs: 1.0,
    "sin": lambda a, attrs: 1.0,
    "cos": lambda a, attrs: 1.0,
    "sigmoid": lambda a, attrs: 1.0,
    "neg": lambda a, attrs: a[0],
    "square": lambda a, attrs: a[0] ** 2,
    "exp": lambda a, attrs: float(np.exp(a[0])),
    "log": lambda a, attrs: 1.2,
    "sqrt": lambda a, attrs: 1.8,
    "reciprocal": lambda a, attrs: 3.4,
    "scale": lambda a, attrs: abs(attrs["scale"]) * a[0] + abs(attrs["bias"]),
    "add": lambda a, attrs: a[0] + a[1],
    "subtract": lambda a, attrs: a[0] + a[1],
    "multiply": lambda a, attrs: a[0] * a[1],
    "divide": lambda a, attrs: a[0] / 0.3,
    "pow": lambda a, attrs: 2.5**2.5,
    "erf": lambda a, attrs: 1.0,
    "gelu": lambda a, attrs: a[0],
    "softmax": lambda a, attrs: 1.0,
}
# bounds that depend on the operands' shapes: `n` the elements combined into one
SPAN_BOUND: dict[str, Callable[[list[float], int], float]] = {
    "cumsum": lambda a, n: a[0] * n,
    "cumprod": lambda a, n: max(1.0, a[0]) ** n,
    "prod": lambda a, n: max(1.0, a[0]) ** n,
    "logsumexp": lambda a, n: a[0] + float(np.log(n)),
    "log_softmax": lambda a, n: 2 * a[0] + float(np.log(n)),
    # indexing: n the indices, each of which may repeat (a read's gradient then accumulates)
    "gather": lambda a, n: a[0],
    "index_select": lambda a, n: a[0],
    "take_along_axis": lambda a, n: a[0],
    "index_add": lambda a, n: a[0] + n * a[2],
    "put_along_axis": lambda a, n: a[0] + n * a[2],
    "scatter": lambda a, n: a[0] + n * a[2],
}
SPAN = 6  # the most elements a product or a scan combines: its rule takes each apart


@dataclass
class _Scope:
    b: Builder
    pool: list[Value]  # values usable here, newest last
    local: set[Value]  # defined in this block: the only ones an in-place op may consume
    concrete: bool  # values are computed as they are drawn (top level, branches)
    depth: int
    counter: Value | None = None  # the trip counter, in a loop body
    trips: int = TRIP_BUDGET  # the trips nested loops here may make, multiplied
    consts: dict[tuple[float, str], Value] = field(default_factory=dict)
    menu: list[str] | None = None  # the step families open here
    floats: list[Value] = field(init=False)  # the pool's float tensors, in its order

    def __post_init__(self) -> None:
        self.floats = [v for v in self.pool if _floating(v)]

    def add(self, values: Sequence[Value]) -> None:
        self.pool += values
        self.floats += [v for v in values if _floating(v)]

    def drop(self, v: Value) -> None:
        self.pool.remove(v)
        if _floating(v):
            self.floats.remove(v)


def _floating(v: Value) -> bool:
    return v.type.__class__ is TensorType and v.type.dtype in FLOAT_DTYPES


class Generator:
    def __init__(self, ch: Chooser, features: Features) -> None:
        self.ch, self.f = ch, features
        self.on = self._switches()
        # the float dtype the program computes in: float32 where that feature is on (its inputs
        # float32, or float64 cast to float32 on entry; an output may be cast back to float64)
        self.dtype = "f32" if "float32" in self.on else "f64"
        self.it = Interpreter()  # records the top level's trace (`_evaluate`)
        self.values: dict[Value, Any] = {}  # each top-level value as computed
        self.bound: dict[Value, float] = {}
        self.kinks: dict[tuple[object, ...], bool] = {}  # (kink, operands...): whether it keeps MARGIN
        self.force_nested = False
        self.pb_inputs: list[Value] = []
        self.pb: ProgramBuilder
        self.xs: list[np.ndarray] = []  # the inputs' values, in the program's order

    def _switches(self) -> set[str]:
        """Swarm testing: each enabled feature of the focus (all, without one) is on in this draw with
        probability 3/4, each other one with probability 1/4."""
        if not self.f.swarm:
            return set(self.f.enabled)
        focus = self.f.focus or self.f.enabled
        on = {n for n in sorted(self.f.enabled - self.f.required) if not self.ch.flag(0.25 if n in focus else 0.75)}
        return on | set(self.f.required)

    # --- values --------------------------------------------------------------------------------
    def floats(self, s: _Scope) -> list[Value]:
        return s.floats  # (not to be changed by the caller)

    def pick(self, s: _Scope, among: Sequence[Value] | None = None) -> Value:
        cands = among if among is not None else self.floats(s)
        if "fanout" not in self.on:
            cands = [v for v in cands if not v.uses] or cands
        return cands[-1 - self.ch.integer(0, len(cands) - 1)]  # a choice, newest first: shrinks to the latest

    def emit(self, s: _Scope, name: str, operands: Sequence[Value], **attrs: object) -> list[Value]:
        op = s.b.op(name, operands, attrs)
        d = OPS[name]
        if d.autodiff.inplace_of is not None:
            consumed = operands[d.autodiff.inplace_of]
            s.drop(consumed)
        if s.concrete:
            self._evaluate(s, op)
        else:
            b = self._body_bound(op)
            for r in op.results:
                self.bound[r] = b
        s.add(op.results)
        s.local.update(op.results)
        return op.results

    def _body_bound(self, op: Operation) -> float:
        """A bound on |result| of `op` in a loop body, from its operands' bounds: what `one` squashes
        by (a value past BOUND goes through tanh), so that trips of products and sums stay tame."""
        a = [self.bound.get(v, 1.0) for v in op.operands]
        d = OPS[op.name]
        rule = BODY_BOUND.get(d.autodiff.base or op.name)
        if rule is not None:
            return rule(a, op.attrs)
        span = SPAN_BOUND.get(op.name)
        if span is not None:
            return span(a, _span(op))
        if op.name == "matmul":
            return a[0] * a[1] * op.operands[0].type.shape[-1]  # type: ignore[union-attr]
        if op.name == "sum":
            return a[0] * max(1, int(np.prod(op.operands[0].type.shape)))  # type: ignore[union-attr,no-any-return]
        if op.name == "add_n":
            return a[0] * len(op.operands[0].type.elems)  # type: ignore[union-attr,no-any-return]
        return max(a, default=1.0)  # (shape ops, assign, mean, combine and split: no larger than their operands)

    def _evaluate(self, s: _Scope, op: Operation) -> None:
        """Compute `op`'s results. The top level's ops run once each, in program order: the program's
        run at the case's inputs (`Case.evaluated`), recorded as the interpreter records a run
        (its trace; each value as computed). A branch's ops are computed as they are drawn and
        again when their `if` runs: only that second run is on record."""
        top = s.depth == 0
        self.it.recording = top
        d = OPS[op.name]
        if top and d.autodiff.inplace_of is not None:  # the consumed value's buffer is about to be overwritten
            v = op.operands[d.autodiff.inplace_of]
            self.values[v] = self.it.copy(self.values.get(v, self.it.env[v]))
        self.it.step(op)
        for r in op.results:
            x = self.it.env[r]
            self.bound[r] = _magnitude(x)
            if top:
                self.values[r] = x

    def one(self, s: _Scope, name: str, *operands: Value, **attrs: object) -> Value:
        (r,) = self.emit(s, name, operands, **attrs)
        if not s.concrete and name in SPAN_BOUND:
            # in a loop body, an op combining n elements (a scan, a product) or reading or writing
            # at n indices that may repeat is scaled by 1/(n+1): a trip must not stretch its
            # carried values or their gradients, or eight trips make a gradient far above the
            # values' (finite differences' false alarms)
            s.drop(r)
            (r,) = self.emit(s, "scale", [r], scale=round(1.0 / (_span(r.owner) + 1), 4), bias=0.0)  # type: ignore[arg-type]
        if is_differentiable(r.type) and self.bound[r] > BOUND:
            s.drop(r)
            (r,) = self.emit(s, "tanh", [r])
        return r

    def const(self, s: _Scope, value: float, dtype: str = "i64") -> Value:
        key = (value, dtype)
        if key not in s.consts:
            s.consts[key] = self.emit(s, "full", [], shape=[], value=float(value), dtype=dtype)[0]
            s.drop(s.consts[key])  # a constant is not a value to differentiate
        return s.consts[key]

    def adapt(self, s: _Scope, v: Value, domain: tuple[float, float]) -> Value:
        """`v` moved into the middle of `domain`, unless its computed values already lie there."""
        lo, hi = domain
        if s.concrete:
            x = self.it.env[v].ravel().tolist()  # (a few elements: no NumPy reduction)
            if min(x, default=hi) > lo + MARGIN and max(x, default=lo) < hi - MARGIN:
                return v
        w = hi - lo
        return self.one(s, "scale", self.one(s, "sigmoid", v), scale=0.6 * w, bias=lo + 0.2 * w)

    def off_kink(self, s: _Scope, kink: Callable[..., Any], args: Sequence[Value], **attrs: Any) -> bool:
        """Whether every element keeps MARGIN from the kink (an op's `kink` function)."""
        if not s.concrete:
            return False
        # ops share kinks (abs and relu; maximum and minimum): tested once
        key = (kink, *args, *sorted((k, str(v)) for k, v in attrs.items()))
        ok = self.kinks.get(key)
        if ok is None:
            d = np.asarray(kink(np, *(self.it.env[v] for v in args), **attrs))
            # (a few elements: no NumPy reduction)
            ok = self.kinks[key] = min(map(abs, d.ravel().tolist()), default=MARGIN) >= MARGIN
        return ok

    # --- steps: one family each ---------------------------------------------------------------
    def steps(self, s: _Scope, least: int, most: int, forced: str | None = None) -> None:
        """`least` to `most` steps, each after a "go on" flag: a failure shrinks by dropping steps."""
        n = 0
        # each step with its flag is one span: hypothesis drops a step whole
        while self.ch.span(partial(self._step, s, n, least, most, forced)):
            n += 1

    def _step(self, s: _Scope, n: int, least: int, most: int, forced: str | None) -> bool:
        # the flag is drawn at `most` too, so that every case ends in a "stop": dropping a step
        # then leaves a valid case (a case drawn up to `most` would otherwise have no stop to reach)
        if n >= least and not self.ch.flag(0.7) or n >= most:
            return False
        if forced is not None and n == 0 and s.depth < self.f.max_depth and self.floats(s):
            getattr(self, "step_" + forced)(s)
        else:
            self.step(s)
        # (a value an op of this block made: a loop's block argument is never marked)
        if "stop_gradient" in self.on and s.pool and s.pool[-1].op is not None and s.pool[-1] in s.local:
            if self.ch.flag(0.1):
                s.pool[-1].stop_gradient = True
        return True

    def ensure_required(self, top: _Scope) -> None:
        """A feature an area requires is in every case: add the step that makes it, if missing."""
        present: tuple[int, set[str]] = (-1, set())  # what the top block holds, at its length
        for name in sorted(self.f.required):
            if not self.floats(top):
                continue
            if present[0] != len(top.b.block.ops):  # (a step added below appends ops to it)
                present = (len(top.b.block.ops), describe_program(top.b.block, self.pb_inputs))
            if name in present[1]:
                continue
            if name == "nested":
                self.force_nested = True
                self.step_while(top)
            elif name in ("inplace", "fanout"):
                v = self.pick(top, [v for v in self.floats(top) if v in top.local] or None)
                if name == "fanout":
                    self.one(top, "multiply", v, v)
                else:
                    w = self.one(top, "exp", v) if v not in top.local else v
                    self.one(top, "tanh_", w)
            elif name == "stop_gradient":
                self.one(top, "tanh", self.pick(top)).stop_gradient = True
            elif hasattr(self, "step_" + name):
                getattr(self, "step_" + name)(top)

    def step(self, s: _Scope) -> None:
        if s.menu is None:
            s.menu = [
                k
                for k in (
                    "unary",
                    "binary",
                    "reduction",
                    "shape",
                    "matmul",
                    "vector",
                    "misc",
                    "index",
                    "along",
                    "if",
                    "while",
                )  # fmt: skip
                if k in self.on and (k not in ("if", "while") or s.depth < self.f.max_depth)
            ]
        menu = s.menu
        if not menu or not self.floats(s):
            return
        kind = self.ch.choice(menu)
        self.ch.note(f"step: {kind}")
        getattr(self, "step_" + kind)(s)

    def step_unary(self, s: _Scope) -> None:
        v = self.pick(s)
        bound = self.bound[v]
        more = "along" in self.on
        menu = [
            n
            for n, kink in (_UNARY_MORE_KINKS if more else _UNARY_KINKS)
            if (kink is None or self.off_kink(s, kink, [v]))
            and (n != "exp" or bound <= 2.5)
            and (n != "square" or bound <= 2.4)
        ]
        if more and s.concrete:
            menu.append("clip")  # (bounds drawn off the values: its kinks keep MARGIN by construction)
        name = self.ch.choice(menu)
        dom = OPS[name].drawing.domain[0] if OPS[name].drawing.domain else None
        if dom is not None:
            v = self.adapt(s, v, dom)
        attrs: dict[str, Any] = {}
        if name == "scale":
            attrs = {"scale": self.ch.choice([2.0, -0.5, 1.5]), "bias": self.ch.choice([0.0, 0.5])}
        elif name == "gelu":
            attrs = {"approximate": self.ch.flag(0.5)}
        elif name == "clip":
            cuts = _cuts(self.it.env[v])
            lo = self.ch.integer(0, len(cuts) - 2)
            attrs = {"min": cuts[lo], "max": cuts[self.ch.integer(lo + 1, len(cuts) - 1)]}
        if "inplace" in self.on and v in s.local and name + "_" in OPS and self.ch.flag(0.5):
            self.one(s, name + "_", v, **attrs)
        else:
            self.one(s, name, v, **attrs)

    def partner(self, s: _Scope, v: Value) -> Value:
        t = v.type
        assert isinstance(t, TensorType)
        ok = [w for w in self.floats(s) if _broadcasts(t.shape, w.type.shape)]  # type: ignore[union-attr]
        return self.pick(s, ok)

    def step_binary(self, s: _Scope) -> None:
        a = self.pick(s)
        b = self.partner(s, a)
        menu = [n for n, kink in _BINARY_KINKS if kink is None or self.off_kink(s, kink, [a, b])]
        name = self.ch.choice(menu)
        dom = OPS[name].drawing.domain
        if dom and dom[0] is not None:
            a = self.adapt(s, a, dom[0])
        if dom and dom[1] is not None:
            b = self.adapt(s, b, dom[1])
        out = broadcast_shapes(a.type.shape, b.type.shape)  # type: ignore[union-attr]
        if (
            "inplace" in self.on
            and a in s.local
            and a is not b
            and out == a.type.shape  # type: ignore[union-attr]
            and name + "_" in OPS
            and self.ch.flag(0.5)
        ):
            self.one(s, name + "_", a, b)
        else:
            self.one(s, name, a, b)

    def step_reduction(self, s: _Scope) -> None:
        v = self.pick(s)
        t = v.type
        assert isinstance(t, TensorType)
        axes = [a for a in range(t.rank) if self.ch.flag(0.5)]
        menu = ["sum", "mean"]
        if "along" in self.on:
            n = int(np.prod([t.shape[a] for a in axes or range(t.rank)]))
            menu += ["logsumexp"] + (["prod"] if n <= SPAN else [])
            for m in ("max", "min"):  # (keepdim does not move a tie)
                if self.off_kink(s, OPS[m].drawing.kink, [v], axes=axes, keepdim=False):  # type: ignore[arg-type]
                    menu.append(m)
            if t.rank and s.concrete:
                menu.append("p_norm")
        name = self.ch.choice(menu)
        attrs: dict[str, Any] = {"axes": axes, "keepdim": self.ch.flag(0.5)}
        if name == "p_norm":
            attrs = {"p": self.ch.choice([1.0, 2.0, float("inf")]), "axis": self.ch.integer(0, t.rank - 1)}
            attrs["keepdim"] = self.ch.flag(0.5)
            if not self.off_kink(s, OPS[name].drawing.kink, [v], **attrs):  # type: ignore[arg-type]
                name, attrs = "sum", {"axes": [attrs["axis"]], "keepdim": attrs["keepdim"]}
        elif name == "prod" and s.concrete and self.ch.flag(0.3):
            v = self.with_zeros(s, v)
        self.one(s, name, v, **attrs)

    def with_zeros(self, s: _Scope, v: Value) -> Value:
        """`v` with its elements below a threshold made exact zeros (where a product's rule must not
        divide by the element): `where(v > c, v, 0)`, c keeping MARGIN from every element."""
        cond = self.emit(s, "greater_than", [v, self.const(s, _gap(self.it.env[v]), self.dtype)])[0]
        s.drop(cond)
        return self.one(s, "where", cond, v, self.const(s, 0.0, self.dtype))

    # --- along an axis: the softmax family, scans, topk ---------------------------------------
    def along_axis(self, s: _Scope) -> tuple[Value, TensorType, int, int] | None:
        """A value of rank >= 1, its type, an axis of it and that axis's length (None: no such value)."""
        ranked = [w for w in self.floats(s) if w.type.rank]  # type: ignore[union-attr]
        if not ranked:
            return None
        v = self.pick(s, ranked)
        t = v.type
        assert isinstance(t, TensorType)
        ax = self.ch.integer(0, t.rank - 1)
        return v, t, ax, t.shape[ax]

    def step_along(self, s: _Scope) -> None:
        got = self.along_axis(s)
        if got is None:
            return self.step_reduction(s)
        v, t, ax, n = got
        menu = ["softmax", "log_softmax", "cumsum"] + (["cumprod"] if n <= SPAN else [])
        k = self.ch.integer(1, n)
        topk = {"k": k, "axis": ax, "largest": self.ch.flag(0.5)}
        if self.off_kink(s, OPS["topk"].drawing.kink, [v], **topk):  # type: ignore[arg-type]
            menu.append("topk")
        name = self.ch.choice(menu)
        if name == "topk":
            values, indices = self.emit(s, "topk", [v], **topk)
            s.drop(indices)
            if self.bound[values] > BOUND:
                s.drop(values)
                self.emit(s, "tanh", [values])
            return
        if name == "cumprod" and s.concrete and self.ch.flag(0.3):
            v = self.with_zeros(s, v)
        attrs: dict[str, Any] = {"axis": ax}
        if name == "cumsum":
            attrs["reverse"] = self.ch.flag(0.3)
        self.one(s, name, v, **attrs)

    # --- indexing: index tensors drawn valid, duplicates on purpose --------------------------------
    def index_input(self, shape: tuple[int, ...], n: int, unique_along: int | None = None) -> Value:
        """A new i64 program input of `shape`, its elements in [0, n): drawn one by one (shrinking
        to 0: duplicates), or, with `unique_along`, distinct along that axis (each line a piece
        of a permutation)."""
        values = np.zeros(shape, dtype=np.int64)
        if unique_along is None:
            for pos in np.ndindex(*shape):
                values[pos] = self.ch.integer(0, n - 1)
        else:
            lines = [d for k, d in enumerate(shape) if k != unique_along]
            for line in np.ndindex(*lines):
                free = list(range(n))
                for j in range(shape[unique_along]):
                    pos = line[:unique_along] + (j,) + line[unique_along:]
                    values[pos] = free.pop(self.ch.integer(0, len(free) - 1))
        v = self.pb.input(f"i{len(self.xs)}", TensorType(shape, "i64"))
        self.xs.append(values)
        self.it.env[v] = values.copy()
        return v

    def like(self, s: _Scope, shape: tuple[int, ...], v: Value, make: Callable[[Value], Value]) -> Value:
        """A float value of `shape`: one of the pool's, or `make` applied to `v` (which has the
        shape of the tensor indexed)."""
        same = [w for w in self.floats(s) if w.type.shape == shape]  # type: ignore[union-attr]
        return self.pick(s, same) if same and self.ch.flag(0.5) else make(v)

    def step_index(self, s: _Scope) -> None:
        got = self.along_axis(s)
        if got is None:
            return self.step_shape(s)
        v, t, ax, n = got
        m = self.ch.integer(1, n + 2)  # (more indices than rows: duplicates for sure)
        name = self.ch.choice(
            ["gather", "index_select", "index_add", "take_along_axis", "put_along_axis", "scatter", "set_value"]
        )
        self.ch.note(f"index: {name}")
        along = t.shape[:ax] + (m,) + t.shape[ax + 1 :]
        if name in ("gather", "index_select"):
            self.one(s, name, v, self.index_input((m,), n), axis=ax)
        elif name == "index_add":
            value = self.like(s, along, v, lambda w: self.one(s, "index_select", w, self.index_input((m,), n), axis=ax))
            self.one(s, name, v, self.index_input((m,), n), value, axis=ax)
        elif name == "take_along_axis":
            self.one(s, name, v, self.index_input(along, n), axis=ax)
        elif name == "put_along_axis":
            add = self.ch.flag(0.5)
            if not add:  # (distinct along the axis: which of two writes wins is unspecified)
                along = t.shape[:ax] + (min(m, n),) + t.shape[ax + 1 :]
            where = self.index_input(along, n, None if add else ax)
            value = self.like(
                s, along, v, lambda w: self.one(s, "take_along_axis", w, self.index_input(along, n), axis=ax)
            )
            self.one(s, name, v, where, value, axis=ax, reduce="add" if add else "assign")
        elif name == "scatter":
            rows = (m,) + t.shape[1:]
            n0 = t.shape[0]
            value = self.like(s, rows, v, lambda w: self.one(s, "gather", w, self.index_input((m,), n0), axis=0))
            self.one(s, name, v, self.index_input((m,), n0), value, overwrite=self.ch.flag(0.5))
        else:  # a slice of v overwritten by a value of its shape (in place: what `x[a:b] = y` makes)
            start = self.ch.integer(0, n - 1)
            cut = {"axes": [ax], "starts": [start], "ends": [self.ch.integer(start + 1, n)]}
            part = t.shape[:ax] + (cut["ends"][0] - start,) + t.shape[ax + 1 :]
            value = self.like(s, part, v, lambda w: self.one(s, "slice", w, **cut))
            inplace = "inplace" in self.on and v in s.local and value is not v and self.ch.flag(0.5)
            self.one(s, "set_value_with_tensor_" if inplace else "set_value_with_tensor", v, value, **cut)

    def step_shape(self, s: _Scope) -> None:
        v = self.pick(s)
        shape = v.type.shape  # type: ignore[union-attr]
        rank = len(shape)
        menu = ["reshape"]
        if rank < MAX_RANK:
            menu += ["unsqueeze", "expand"]
        if rank >= 2:
            menu.append("transpose")
        if any(d >= 2 for d in shape):
            menu += ["slice", "pad"]
        if 1 in shape:
            menu += ["squeeze", "expand"]
        name = self.ch.choice(menu)
        if name == "unsqueeze":
            self.one(s, name, v, axes=[self.ch.integer(0, rank)])
        elif name == "reshape":
            self.one(s, name, v, shape=list(self.ch.choice(_factorings(int(np.prod(shape)) if shape else 1))))
        elif name == "transpose":
            self.one(s, name, v, perm=list(self.ch.choice(_permutations(rank))))
        elif name in ("slice", "pad"):
            ax = self.ch.choice([i for i, d in enumerate(shape) if d >= 2])
            if name == "slice":
                start = self.ch.integer(0, shape[ax] - 1)
                self.one(s, name, v, axes=[ax], starts=[start], ends=[self.ch.integer(start + 1, shape[ax])])
            else:
                low = [0] * rank
                low[ax] = 1
                self.one(s, name, v, low=low, high=[0] * rank)
        elif name == "squeeze":
            self.one(s, name, v, axes=[self.ch.choice([i for i, d in enumerate(shape) if d == 1])])
        else:  # expand: a 1 to 2, or a new leading axis of 2
            ones = [i for i, d in enumerate(shape) if d == 1]
            k = self.ch.choice(ones) if ones and (rank == MAX_RANK or self.ch.flag(0.5)) else None
            new = [2, *shape] if k is None else [2 if i == k else d for i, d in enumerate(shape)]
            self.one(s, name, v, shape=new)

    def step_matmul(self, s: _Scope) -> None:
        mats = [v for v in self.floats(s) if v.type.rank == 2]  # type: ignore[union-attr]
        if not mats:
            return self.step_shape(s)
        a = self.pick(s, mats)
        k = a.type.shape[1]  # type: ignore[union-attr]
        partners = [v for v in mats if v.type.shape[0] == k]  # type: ignore[union-attr]
        b = self.pick(s, partners) if partners and self.ch.flag(0.5) else self.one(s, "transpose", a, perm=[1, 0])
        self.one(s, "matmul", a, b)

    def step_vector(self, s: _Scope) -> None:
        v = self.pick(s)
        same = [w for w in self.floats(s) if w.type == v.type]
        parts = [v] + [self.pick(s, same) for _ in range(self.ch.integer(1, 2))]
        shape = v.type.shape  # type: ignore[union-attr]
        menu = ["split", "add_n", "stack"] + (["concat", "unbind", "split_with_sections"] if shape else [])
        name = self.ch.choice(menu)
        if name in ("unbind", "split_with_sections"):
            ax = 0
            n = shape[ax]
            if name == "split_with_sections" and n < 2:
                name = "unbind"
            vec = (
                self.emit(s, "unbind", [v], axis=ax)
                if name == "unbind"
                else self.emit(s, name, [v], axis=ax, sections=[1, n - 1])
            )[0]
        else:
            vec = self.emit(s, "combine", parts)[0]
            if name != "split":
                self.one(s, name, vec, **({"axis": 0} if name in ("concat", "stack") else {}))
                return
        s.drop(vec)
        pieces = self.emit(s, "split", [vec])
        keep = [p for p in pieces if self.ch.flag(0.6)] or pieces[:1]
        for p in pieces:
            if p not in keep:
                s.drop(p)  # a partially used split

    def step_misc(self, s: _Scope) -> None:
        v = self.pick(s)
        # (where's condition needs the values, which a loop body has not: it assigns)
        name = self.ch.choice(["where", "assign"]) if s.concrete else "assign"
        if name == "assign":
            self.one(s, "assign", v)
            return
        c = _gap(self.it.env[v])
        cond = self.emit(s, "greater_than", [v, self.const(s, c, self.dtype)])[0]
        s.drop(cond)
        other = self.partner(s, v)
        self.one(s, "where", cond, v, other)

    def predicate(self, s: _Scope) -> Value:
        if s.counter is not None:  # in a loop body: test the trip counter, no margin needed
            return self._detached(s, self.emit(s, "less_than", [s.counter, self.const(s, self.ch.integer(1, 2))])[0])
        v = self.pick(s)
        red = v if v.type.rank == 0 else self.one(s, "sum", v, axes=[], keepdim=False)  # type: ignore[union-attr]
        x = float(self.it.env[red])
        delta = max(0.3, 0.2 * abs(x))
        c = x - delta if self.ch.flag(0.5) else x + delta
        return self._detached(s, self.emit(s, "greater_than", [red, self.const(s, round(c, 3), self.dtype)])[0])

    def _detached(self, s: _Scope, v: Value) -> Value:
        s.drop(v)
        return v

    def branch(self, s: _Scope, label: str, shapes: list[Value]) -> Block:
        blk = Block(label)
        inner = _Scope(Builder(blk), list(s.pool), set(), s.concrete, s.depth + 1, s.counter, s.trips)
        self.steps(inner, 0, 2)
        yields = []
        for like in shapes:
            cands = [v for v in self.floats(inner) if v.type == like.type]
            yields.append(cands[-1] if self.ch.flag(0.75) else self.ch.choice(cands[::-1]))
        Builder(blk).op("yield", yields)
        return blk

    def step_if(self, s: _Scope) -> None:
        cond = self.predicate(s)
        like = [self.pick(s)]
        if self.ch.flag(0.3):
            like.append(self.pick(s))
        blocks = [self.branch(s, "then", like), self.branch(s, "else", like)]
        op = s.b.op("if", [cond], blocks=blocks)
        self._after_region(s, op, blocks)

    def step_while(self, s: _Scope) -> None:
        """A loop of 0..8 trips (within the scope's budget), counted by its integer counter or, for a
        `data` loop, decided by a float condition on a carried `t` (the module docstring)."""
        data = self.ch.flag(0.3)
        # a long loop (4..8 trips) one time in five: each trip costs every run of the case
        most = min(MAX_TRIPS, s.trips)
        trips = self.ch.integer(4, most) if most >= 4 and self.ch.flag(0.2) else self.ch.integer(0, min(3, most))
        carried = [self.pick(s)]
        if self.ch.flag(0.3):
            carried.append(self.pick(s))
        one, i0 = self.const(s, 1), self.const(s, 0)
        if data:
            v = self.pick(s)
            red = v if v.type.rank == 0 else self.one(s, "sum", v, axes=[], keepdim=False)  # type: ignore[union-attr]
            t0 = self.one(s, "scale", self.one(s, "sigmoid", red), scale=0.2, bias=0.1)
            lim, step = self.const(s, trips - 0.5, self.dtype), self.const(s, 1.0, self.dtype)
            carried.insert(0, t0)
        else:
            lim = self.const(s, trips)
        types = [i0.type] + [v.type for v in carried]
        cond = Builder(s.b.block).block_of(
            "cond", types, lambda b, i, *rest: [b.less_than(rest[0] if data else i, lim)]
        )
        body = Block("body", [Value(t) for t in types])
        args = body.args[1:]
        for a, v in zip(args, carried):
            self.bound[a] = max(self.bound[v], 1.0)
        if data:
            self.bound[args[0]] = MAX_TRIPS + 0.5
        local = set(args[1:] if data else args)  # (t only counts: no in-place op may overwrite it)
        inner = _Scope(
            Builder(body), [*s.pool, *args], local, False, s.depth + 1, body.args[0], s.trips // max(trips, 1)
        )
        self.steps(inner, 1, 3, forced="if" if self.force_nested else None)
        self.force_nested = False
        yields = [self.emit(inner, "add", [body.args[0], one])[0]]
        if data:
            yields.append(self._detached(inner, self.emit(inner, "add", [args[0], step])[0]))
        for like in carried[1:] if data else carried:
            cands = [v for v in self.floats(inner) if v.type == like.type]
            v = cands[-1] if self.ch.flag(0.75) else self.ch.choice(cands[::-1])
            if self.bound.get(v, 1.0) > 1.0:
                # a contraction before the squash: a trip's map must not stretch its carried values,
                # or eight trips of sin(4x) make a gradient 4^8 times the values' (finite differences'
                # false alarms); scaled to within +-1/2, a trip shrinks where the body stretched
                v = self.emit(inner, "scale", [v], scale=round(0.5 / self.bound[v], 4), bias=0.0)[0]
            squash = self.ch.choice(SQUASH)
            inplace = "inplace" in self.on and v in inner.local and self.ch.flag(0.4)
            yields.append(self._detached(inner, self.emit(inner, squash + "_" if inplace else squash, [v])[0]))
        Builder(body).op("yield", yields)
        op = s.b.op("while", [i0, *carried], blocks=[cond, body])
        self._after_region(s, op, [cond, body])
        s.drop(op.results[0])

    def _after_region(self, s: _Scope, op: Operation, blocks: list[Block]) -> None:
        if s.concrete:
            self._evaluate(s, op)
        else:
            ends = blocks[-1:] if op.name == "while" else blocks  # (a loop's results are its body's yields)
            for k, r in enumerate(op.results):
                self.bound[r] = max(self.bound.get(b.terminator.operands[k], 1.0) for b in ends)  # type: ignore[union-attr]
        s.add(op.results)
        s.local.update(op.results)

    # --- the whole case ------------------------------------------------------------------------
    def case(self) -> Case:
        pb = self.pb = ProgramBuilder()
        top = _Scope(pb, [], set(), True, 0)
        n_in = self.ch.integer(1, 3)
        xs = self.xs = []
        for k in range(n_in):
            shape = self.ch.choice(SHAPES)
            sg = "stop_gradient" in self.on and self.ch.flag(0.2)
            # a float32 program's input is float64 one time in four, cast to float32 on entry
            dtype = "f64" if self.dtype == "f64" or self.ch.flag(0.25) else "f32"
            v = pb.input(f"x{k}", TensorType(shape, dtype), stop_gradient=sg)
            x = self.ch.uniform(-1.0, 1.0, shape).astype(xp_dtype(np, dtype))
            xs.append(x)
            self.it.env[v] = x.copy()
            self.bound[v] = _magnitude(x)
            top.add([v])
            top.local.add(v)
            self.pb_inputs.append(v)
            if dtype != self.dtype:
                self.emit(top, "cast", [v], dtype=self.dtype)
                top.drop(v)
        self.steps(top, 1, self.f.max_ops)
        self.ensure_required(top)
        if "unreachable" in self.on:
            shape = self.ch.choice(SHAPES)
            pb.input(f"x{len(xs)}", TensorType(shape, self.dtype))
            xs.append(self.ch.uniform(-1.0, 1.0, shape).astype(xp_dtype(np, self.dtype)))
        floats = self.floats(top)
        least = 2 if "multi_output" in self.f.required and len(floats) >= 2 else 1
        n_out = self.ch.integer(least, max(least, min(3, len(floats)))) if "multi_output" in self.on else 1
        outs: list[Value] = []
        for k in range(n_out):
            rest = [v for v in floats if v not in outs]
            outs.append(rest[-1] if k == 0 else self.ch.choice(rest[::-1]))  # the newest value first
        if self.dtype == "f32":  # an output cast back to float64, one time in four
            outs = [self.emit(top, "cast", [v], dtype="f64")[0] if self.ch.flag(0.25) else v for v in outs]
        program = pb.build(*outs)
        wrt = [i for i, v in enumerate(program.inputs) if is_differentiable(v.type)]
        no_grad = []
        if "no_grad" in self.on:
            inner = [r for op in program.walk() if op.parent is not program.block for r in op.results if _floating(r)]
            no_grad = [self.ch.choice([*inner, *program.inputs, *floats][::-1])]
        cots = None
        if "cotangents" in self.on:
            cots = [
                self.ch.uniform(-1.0, 1.0, v.type.shape).astype(xp_dtype(np, v.type.dtype))  # type: ignore[union-attr]
                for v in outs
            ]
        ran = Evaluation(program, xs, self.it.trace, self.values)
        return Case(program, xs, list(range(len(outs))), wrt, cots, no_grad, evaluated=ran)


def _magnitude(x: object) -> float:
    if isinstance(x, tuple):
        return max((_magnitude(e) for e in x), default=0.0)
    a = np.asarray(x)
    # a few elements: a Python max beats a NumPy reduction's fixed cost by 2x
    return float(max(map(abs, a.ravel().tolist()), default=0.0)) if a.dtype.kind == "f" else 0.0


@functools.cache  # (a handful of shapes)
def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(a[::-1], b[::-1]))


def _gap(x: np.ndarray) -> float:
    """A threshold keeping MARGIN from every element of `x`, splitting them where it can."""
    vals = np.sort(np.asarray(x, dtype=np.float64).ravel())
    gaps = [(vals[i + 1] - vals[i], (vals[i] + vals[i + 1]) / 2) for i in range(len(vals) - 1)]
    wide = [c for g, c in gaps if g >= 2 * MARGIN + 0.01]
    # rounding moves the threshold by < 1e-4, far less than the margin
    return round(float(wide[0]), 4) if wide else round(float(vals[0]) - 0.25, 4)


def _cuts(x: np.ndarray) -> list[float]:
    """Thresholds keeping MARGIN from every element of `x`, in order: below them all, in each wide
    gap between two, above them all (clip's bounds)."""
    vals = np.sort(np.asarray(x, dtype=np.float64).ravel())
    inner = [(a + b) / 2 for a, b in zip(vals[:-1], vals[1:]) if b - a >= 2 * MARGIN + 0.01]
    return [round(float(c), 4) for c in [vals[0] - 0.25, *inner, vals[-1] + 0.25]]


def _span(op: Operation) -> int:
    """How many elements an op combines into one, or, for indexing, how many indices it has (each
    may repeat): SPAN_BOUND."""
    if OPS[op.name].drawing.family == "index":
        return op.operands[1].type.size  # type: ignore[union-attr]
    x = op.operands[0].type
    assert isinstance(x, TensorType)
    if "axes" in op.attrs:
        return int(np.prod([x.shape[a] for a in op.attrs["axes"] or range(x.rank)]))
    return x.shape[op.attrs["axis"]]


@functools.cache
def _permutations(rank: int) -> list[tuple[int, ...]]:
    """Every order of `rank` axes but the identity."""
    return [p for p in itertools.permutations(range(rank)) if p != tuple(range(rank))]


@functools.cache
def _factorings(n: int) -> list[tuple[int, ...]]:
    """Every shape of `n` elements and rank 1..MAX_RANK, the flattest first."""

    def split(m: int, rank: int) -> list[tuple[int, ...]]:
        if rank == 1:
            return [(m,)]
        return [(d, *rest) for d in range(1, m + 1) if m % d == 0 for rest in split(m // d, rank - 1)]

    return [f for rank in range(1, MAX_RANK + 1) for f in split(n, rank)]
