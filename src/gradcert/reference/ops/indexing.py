"""Indexing ops: reads at integer indices (`gather`, `index_select`, `take_along_axis`), writes at
them (`put_along_axis`, `scatter`, `index_add`) and slice assignment (`set_value_with_tensor`,
and its in-place twin, what Paddle's `x[a:b] = v` makes in a static program).

Index tensors are `i64` values; the generators draw them valid by construction and, where the op
accumulates, with duplicates on purpose: a duplicate index is where a read's backward must
accumulate (`index_add`, `put_along_axis(add)`), not overwrite. A write that keeps one of several
values written at one index (`scatter` with `overwrite`) keeps the last, as Paddle's kernel does,
and only that value has a gradient; `put_along_axis(assign)` is drawn without duplicates, since
which write wins there is left unspecified by the frameworks.

The write kernels loop over the indices (a handful: the generators' tensors are small), so that
they run unchanged on every Array-API namespace and say which write wins.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from gradcert.reference.ir import Operation
from gradcert.reference.ir.types import TensorType, Type, xp_dtype
from gradcert.reference.ops.base import OpDef, TypeRuleError, float_tensor, inplace_variant, norm_axes, register, tensor
from gradcert.reference.ops.structure import _slice_shape, slice_index
from gradcert.reference.ops.vjp import ZERO, Cotangent, Incoming, VjpContext, value

A = dict[str, Any]


def _index(t: Type, what: str = "index") -> TensorType:
    i = tensor(t, what)
    if i.dtype != "i64":
        raise TypeRuleError(f"{what} must be an i64 tensor, got {i}")
    return i


def _axis_of(x: TensorType, axis: int) -> int:
    if x.rank == 0:
        raise TypeRuleError(f"indexing needs a tensor of rank >= 1, got {x}")
    (ax,) = norm_axes([axis], x.rank)
    return ax


def _at(ax: int, i: Any) -> tuple[Any, ...]:
    """The index of position `i` along axis `ax`, every other axis whole."""
    return (slice(None),) * ax + (i, ...)


def _copy(xp: Any, x: Any) -> Any:
    return xp.asarray(x, copy=True)


# --- gather, index_select, index_add: one index vector along one axis ---------------------------


def _select_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x, i = float_tensor(types[0]), _index(types[1])
    ax = _axis_of(x, a["axis"])
    if i.rank != 1:
        raise TypeRuleError(f"index must have rank 1, got {i}")
    return [TensorType(x.shape[:ax] + i.shape + x.shape[ax + 1 :], x.dtype)]


def _select_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    x, index = op.operands
    return [ctx.index_add(ctx.zeros(x.type), ctx.primal(index), value(cts[0]), axis=op.attrs["axis"]), ZERO]


def _index_add_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x, i, v = float_tensor(types[0]), _index(types[1]), float_tensor(types[2], "value")
    ax = _axis_of(x, a["axis"])
    want = x.shape[:ax] + i.shape + x.shape[ax + 1 :]
    if i.rank != 1 or v.shape != want or v.dtype != x.dtype:
        raise TypeRuleError(f"index_add of {v} at {i} into {x} along axis {ax}: value must be {want}")
    return [x]


def _index_add(xp: Any, x: Any, index: Any, value: Any, axis: int) -> Any:
    out, ax = _copy(xp, x), axis % x.ndim
    for k in range(index.shape[0]):
        out[_at(ax, int(index[k]))] += value[_at(ax, k)]
    return out


def _index_add_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    index = ctx.primal(op.operands[1])
    return [
        value(cts[0]) if needed[0] else ZERO,
        ZERO,
        ctx.index_select(value(cts[0]), index, axis=op.attrs["axis"]) if needed[2] else ZERO,
    ]


# --- take_along_axis, put_along_axis: an index per element ---------------------------------------


def _along_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x, i = float_tensor(types[0]), _index(types[1], "indices")
    ax = _axis_of(x, a["axis"])
    if i.rank != x.rank or any(d != e for k, (d, e) in enumerate(zip(i.shape, x.shape)) if k != ax):
        raise TypeRuleError(f"indices {i} must match {x} on every axis but {ax}")
    return [TensorType(i.shape, x.dtype)]


def _take_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    x, indices = op.operands
    zeros = ctx.zeros(x.type)
    return [ctx.put_along_axis(zeros, ctx.primal(indices), value(cts[0]), axis=op.attrs["axis"], reduce="add"), ZERO]


def _put_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    if a["reduce"] not in ("assign", "add"):
        raise TypeRuleError(f"reduce must be assign or add, got {a['reduce']}")
    (t,) = _along_infer(types[:2], a, blocks)
    if types[2] != t:
        raise TypeRuleError(f"values must be {t}, got {types[2]}")
    return [types[0]]


def _put_along_axis(xp: Any, x: Any, indices: Any, values: Any, axis: int, reduce: str) -> Any:
    out, ax = _copy(xp, x), axis % x.ndim
    for pos in itertools.product(*(range(d) for d in indices.shape)):
        to = pos[:ax] + (int(indices[pos]),) + pos[ax + 1 :]
        if reduce == "add":
            out[to] += values[pos]
        else:
            out[to] = values[pos]
    return out


def _put_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    x, indices, values = op.operands
    g, ax = value(cts[0]), op.attrs["axis"]
    where = ctx.primal(indices)
    dx = g
    if needed[0] and op.attrs["reduce"] == "assign":  # what was overwritten has no gradient
        kept = ctx.put_along_axis(
            ctx.full(shape=list(x.tensor.shape), value=1.0, dtype=x.tensor.dtype),
            where,
            ctx.zeros(values.type),
            axis=ax,
            reduce="assign",
        )
        dx = ctx.multiply(g, kept)
    return [
        dx if needed[0] else ZERO,
        ZERO,
        ctx.take_along_axis(g, where, axis=ax) if needed[2] else ZERO,
    ]


# --- scatter: rows of updates written at rows of x (axis 0) --------------------------------------


def _scatter_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x, i, u = float_tensor(types[0]), _index(types[1]), float_tensor(types[2], "updates")
    _axis_of(x, 0)
    if i.rank != 1 or u.shape != i.shape + x.shape[1:] or u.dtype != x.dtype:
        raise TypeRuleError(f"scatter of {u} at {i} into {x}: updates must be {list(i.shape + x.shape[1:])}")
    return [x]


def _scatter(xp: Any, x: Any, index: Any, updates: Any, overwrite: bool) -> Any:
    """Paddle's semantics: overwrite, the last update at a row wins; otherwise a row written to is
    zeroed, then every update at it is added."""
    out = _copy(xp, x)
    rows = [int(index[k]) for k in range(index.shape[0])]
    if not overwrite:
        for r in set(rows):
            out[r, ...] = 0.0
    for k, r in enumerate(rows):
        if overwrite:
            out[r, ...] = updates[k, ...]
        else:
            out[r, ...] += updates[k, ...]
    return out


def _last_occurrence(xp: Any, index: Any, dtype: str) -> Any:
    rows = [int(index[k]) for k in range(index.shape[0])]
    last = [float(r not in rows[k + 1 :]) for k, r in enumerate(rows)]
    return xp.asarray(last, dtype=xp_dtype(xp, dtype))


def _scatter_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    x, index, updates = op.operands
    g, where = value(cts[0]), ctx.primal(index)
    dx: Cotangent = ZERO
    dupdates: Cotangent = ZERO
    if needed[0]:  # the rows written have no gradient in x
        kept = ctx.scatter(
            ctx.full(shape=list(x.tensor.shape), value=1.0, dtype=x.tensor.dtype),
            where,
            ctx.zeros(updates.type),
            overwrite=True,
        )
        dx = ctx.multiply(g, kept)
    if needed[2]:
        dupdates = ctx.gather(g, where, axis=0)
        if op.attrs["overwrite"]:  # only the update that won its row
            won = ctx.last_occurrence(where, dtype=x.tensor.dtype)
            shape = [updates.tensor.shape[0]] + [1] * (updates.tensor.rank - 1)
            dupdates = ctx.multiply(dupdates, ctx.reshape(won, shape=shape))
    return [dx, ZERO, dupdates]


# --- set_value_with_tensor: a slice of x overwritten by a value -----------------------------------


def _set_value_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x, v = float_tensor(types[0]), float_tensor(types[1], "value")
    want = tuple(_slice_shape(x, a))
    if v.shape != want or v.dtype != x.dtype:
        raise TypeRuleError(f"value {v} does not fit the slice {list(want)} of {x}")
    return [x]


def _set_value(xp: Any, x: Any, value: Any, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> Any:
    out = _copy(xp, x)
    out[slice_index(x.ndim, axes, starts, ends)] = value
    return out


def _set_value_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    where = {k: op.attrs[k] for k in ("axes", "starts", "ends")}
    g = value(cts[0])
    return [
        ctx.set_value_with_tensor(g, ctx.zeros(op.operands[1].type), **where) if needed[0] else ZERO,
        ctx.slice(g, **where) if needed[1] else ZERO,
    ]


_set_value_def = OpDef(
    "set_value_with_tensor",
    _set_value_infer,
    _set_value,
    _set_value_vjp,
    nargs=2,
    attrs={"axes": "ints", "starts": "ints", "ends": "ints"},
    family="index",
)
register(
    # (two Paddle ops of one semantics: each is lowered to its own framework op)
    *(
        OpDef(
            name,
            _select_infer,
            lambda xp, x, index, axis: xp.take(x, index, axis=axis),
            _select_vjp,
            nargs=2,
            attrs={"axis": "int"},
            defaults={"axis": 0},
            differentiable=(0,),
            family="index",
        )
        for name in ("gather", "index_select")
    ),
    OpDef(
        "index_add",
        _index_add_infer,
        _index_add,
        _index_add_vjp,
        nargs=3,
        attrs={"axis": "int"},
        defaults={"axis": 0},
        differentiable=(0, 2),
        family="index",
    ),
    OpDef(
        "take_along_axis",
        _along_infer,
        lambda xp, x, indices, axis: xp.take_along_axis(x, indices, axis=axis),
        _take_vjp,
        nargs=2,
        attrs={"axis": "int"},
        differentiable=(0,),
        family="index",
    ),
    OpDef(
        "put_along_axis",
        _put_infer,
        _put_along_axis,
        _put_vjp,
        nargs=3,
        attrs={"axis": "int", "reduce": "word"},
        defaults={"reduce": "assign"},
        differentiable=(0, 2),
        family="index",
    ),
    OpDef(
        "scatter",
        _scatter_infer,
        _scatter,
        _scatter_vjp,
        nargs=3,
        attrs={"overwrite": "bool"},
        defaults={"overwrite": True},
        differentiable=(0, 2),
        family="index",
    ),
    # which of an index's occurrences is its last (1.0) -- the update `scatter` keeps: a constant of
    # scatter's backward, never drawn
    OpDef(
        "last_occurrence",
        lambda types, a, blocks: [TensorType(_index(types[0]).shape, a["dtype"])],
        _last_occurrence,
        None,
        attrs={"dtype": "dtype"},
        forward_only=True,
        family="index",
    ),
    _set_value_def,
    inplace_variant(_set_value_def),
)
