"""Reductions, matmul, shape ops, creation, casts and comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gradcert.reference.ir import Operation
from gradcert.reference.ir.types import DTYPES, TensorType, Type, xp_dtype
from gradcert.reference.ops.base import (
    OpDef,
    TypeRuleError,
    at_tie,
    broadcast_shapes,
    float_tensor,
    norm_axes,
    register,
    tensor,
)
from gradcert.reference.ops.vjp import ZERO, Cotangent, Incoming, VjpContext, value

A = dict[str, Any]


def _reduced(x: TensorType, axes: Sequence[int], keepdim: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(reduced shape, keepdim shape) of reducing `x` over `axes` (empty: all axes)."""
    ax = norm_axes(axes, x.rank) if axes else tuple(range(x.rank))
    keep = tuple(1 if i in ax else d for i, d in enumerate(x.shape))
    out = keep if keepdim else tuple(d for i, d in enumerate(x.shape) if i not in ax)
    return out, keep


def _reduce_infer(types: Sequence[Type], attrs: A, blocks: Sequence[Any]) -> list[Type]:
    x = float_tensor(types[0])
    out, _ = _reduced(x, attrs["axes"], attrs["keepdim"])
    return [TensorType(out, x.dtype)]


def _axes(x: Any, attrs_axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(a % x.ndim for a in attrs_axes) if attrs_axes else tuple(range(x.ndim))


def _reduce_vjp(mean: bool) -> Any:
    def vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
        x = op.operands[0].tensor
        _, keep = _reduced(x, op.attrs["axes"], op.attrs["keepdim"])
        g = ctx.expand(ctx.reshape(value(cts[0]), shape=list(keep)), shape=list(x.shape))
        if mean:
            n = x.size // max(1, TensorType(keep).size)
            g = ctx.scale(g, scale=1.0 / max(n, 1), bias=0.0)
        return [g]

    return vjp


_red = {"axes": "ints", "keepdim": "bool"}
_red_def = {"axes": [], "keepdim": False}
register(
    OpDef(
        "sum",
        _reduce_infer,
        lambda xp, x, axes, keepdim: xp.sum(x, axis=_axes(x, axes), keepdims=keepdim),
        _reduce_vjp(False),
        attrs=_red,
        defaults=_red_def,
        family="reduction",
    ),
    OpDef(
        "mean",
        _reduce_infer,
        lambda xp, x, axes, keepdim: xp.mean(x, axis=_axes(x, axes), keepdims=keepdim),
        _reduce_vjp(True),
        attrs=_red,
        defaults=_red_def,
        family="reduction",
    ),
)


# --- matmul: [..., m, k] x [..., k, n] -> [..., m, n], batch dims broadcast ----------------------


def _matmul_infer(types: Sequence[Type], attrs: A, blocks: Sequence[Any]) -> list[Type]:
    a, b = float_tensor(types[0], "lhs"), float_tensor(types[1], "rhs")
    if a.rank < 2 or b.rank < 2:
        raise TypeRuleError(f"matmul needs rank >= 2 operands, got {a} and {b}")
    if a.dtype != b.dtype:
        raise TypeRuleError(f"dtypes differ: {a} and {b}")
    if a.shape[-1] != b.shape[-2]:
        raise TypeRuleError(f"contracted dims differ: {a} and {b}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return [TensorType((*batch, a.shape[-2], b.shape[-1]), a.dtype)]


def _mT(ctx: VjpContext, v: Any) -> Any:
    r = v.tensor.rank
    return ctx.transpose(v, perm=[*range(r - 2), r - 1, r - 2])


def _matmul_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    a, b = op.operands
    g = value(cts[0])
    return [
        ctx.unbroadcast(ctx.matmul(g, _mT(ctx, ctx.primal(b))), a) if needed[0] else ZERO,
        ctx.unbroadcast(ctx.matmul(_mT(ctx, ctx.primal(a)), g), b) if needed[1] else ZERO,
    ]


register(OpDef("matmul", _matmul_infer, lambda xp, a, b: xp.matmul(a, b), _matmul_vjp, nargs=2, family="matmul"))


# --- shape ops -----------------------------------------------------------------------------------


def _shape_op(
    name: str, attrs: dict[str, str], out_shape: Any, kernel: Any, vjp: Any, defaults: A | None = None
) -> OpDef:
    def infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
        x = tensor(types[0])
        return [TensorType(tuple(out_shape(x, a)), x.dtype)]

    return OpDef(name, infer, kernel, vjp, attrs=attrs, defaults=defaults or {}, view=True, family="shape")


def _reshape_shape(x: TensorType, a: A) -> Sequence[int]:
    shape = tuple(a["shape"])
    if TensorType(shape).size != x.size:
        raise TypeRuleError(f"cannot reshape {x} to {list(shape)}")
    return shape


def _perm_shape(x: TensorType, a: A) -> Sequence[int]:
    perm = list(a["perm"])
    if sorted(perm) != list(range(x.rank)):
        raise TypeRuleError(f"perm {perm} is not a permutation of {x.rank} axes")
    return [x.shape[p] for p in perm]


def _slice_shape(x: TensorType, a: A) -> Sequence[int]:
    axes, starts, ends = a["axes"], a["starts"], a["ends"]
    if not len(axes) == len(starts) == len(ends):
        raise TypeRuleError("axes, starts and ends differ in length")
    shape = list(x.shape)
    for ax, s, e in zip(norm_axes(axes, x.rank), starts, ends):
        if not 0 <= s < e <= shape[ax]:
            raise TypeRuleError(f"slice [{s}:{e}] out of range for axis {ax} of {x}")
        shape[ax] = e - s
    return shape


def slice_index(ndim: int, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> tuple[slice, ...]:
    """The index of a `slice` op's (and a slice assignment's) piece of a rank-`ndim` tensor."""
    idx = [slice(None)] * ndim
    for ax, s, e in zip(axes, starts, ends):
        idx[ax % ndim] = slice(s, e)
    return tuple(idx)


def _slice_kernel(xp: Any, x: Any, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> Any:
    return x[slice_index(x.ndim, axes, starts, ends)]


def _pad_shape(x: TensorType, a: A) -> Sequence[int]:
    low, high = a["low"], a["high"]
    if not len(low) == len(high) == x.rank or min([0, *low, *high]) < 0:
        raise TypeRuleError(f"pad widths {list(low)}/{list(high)} do not fit {x}")
    return [d + lo + hi for d, lo, hi in zip(x.shape, low, high)]


def _pad_kernel(xp: Any, x: Any, low: Sequence[int], high: Sequence[int]) -> Any:
    shape = tuple(d + lo + hi for d, lo, hi in zip(x.shape, low, high))
    out = xp.zeros(shape, dtype=x.dtype)
    out[tuple(slice(lo, lo + d) for d, lo in zip(x.shape, low))] = x
    return out


def _expand_shape(x: TensorType, a: A) -> Sequence[int]:
    shape = tuple(a["shape"])
    if len(shape) < x.rank or broadcast_shapes(x.shape, shape) != shape:
        raise TypeRuleError(f"cannot expand {x} to {list(shape)}")
    return shape


def _squeeze_shape(x: TensorType, a: A) -> Sequence[int]:
    axes = norm_axes(a["axes"], x.rank)
    if any(x.shape[ax] != 1 for ax in axes):
        raise TypeRuleError(f"squeezed axes {list(a['axes'])} of {x} are not 1")
    return [d for i, d in enumerate(x.shape) if i not in axes]


def _unsqueeze_shape(x: TensorType, a: A) -> Sequence[int]:
    rank = x.rank + len(a["axes"])
    axes = norm_axes(a["axes"], rank)
    it = iter(x.shape)
    return [1 if i in axes else next(it) for i in range(rank)]


def _back_to(ctx: VjpContext, op: Operation, g: Any) -> Any:
    return ctx.reshape(g, shape=list(op.operands[0].tensor.shape))


def _inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _slice_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    x = op.operands[0].tensor
    low, high = [0] * x.rank, [0] * x.rank
    for ax, s, e in zip(norm_axes(op.attrs["axes"], x.rank), op.attrs["starts"], op.attrs["ends"]):
        low[ax], high[ax] = s, x.shape[ax] - e
    return [ctx.pad(value(cts[0]), low=low, high=high)]


def _pad_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    x = op.operands[0].tensor
    return [
        ctx.slice(
            value(cts[0]),
            axes=list(range(x.rank)),
            starts=list(op.attrs["low"]),
            ends=[lo + d for lo, d in zip(op.attrs["low"], x.shape)],
        )
    ]


register(
    _shape_op(
        "reshape",
        {"shape": "ints"},
        _reshape_shape,
        lambda xp, x, shape: xp.reshape(x, tuple(shape)),
        lambda ctx, op, cts, needed: [_back_to(ctx, op, value(cts[0]))],
    ),
    _shape_op(
        "transpose",
        {"perm": "ints"},
        _perm_shape,
        lambda xp, x, perm: xp.permute_dims(x, tuple(perm)),
        lambda ctx, op, cts, needed: [ctx.transpose(value(cts[0]), perm=_inverse(op.attrs["perm"]))],
    ),
    _shape_op("slice", {"axes": "ints", "starts": "ints", "ends": "ints"}, _slice_shape, _slice_kernel, _slice_vjp),
    _shape_op("pad", {"low": "ints", "high": "ints"}, _pad_shape, _pad_kernel, _pad_vjp),
    _shape_op(
        "expand",
        {"shape": "ints"},
        _expand_shape,
        lambda xp, x, shape: xp.broadcast_to(x, tuple(shape)),
        lambda ctx, op, cts, needed: [ctx.unbroadcast(value(cts[0]), op.operands[0])],
    ),
    _shape_op(
        "squeeze",
        {"axes": "ints"},
        _squeeze_shape,
        lambda xp, x, axes: xp.squeeze(x, axis=tuple(a % x.ndim for a in axes)),
        lambda ctx, op, cts, needed: [_back_to(ctx, op, value(cts[0]))],
    ),
    _shape_op(
        "unsqueeze",
        {"axes": "ints"},
        _unsqueeze_shape,
        lambda xp, x, axes: xp.reshape(x, tuple(_unsqueeze_shape(TensorType(tuple(x.shape)), {"axes": axes}))),
        lambda ctx, op, cts, needed: [_back_to(ctx, op, value(cts[0]))],
    ),
)


# --- creation, cast, assign, where ----------------------------------------------------------------


def _dtype_attr(a: A) -> str:
    if a["dtype"] not in DTYPES:
        raise TypeRuleError(f"unknown dtype {a['dtype']!r}")
    return str(a["dtype"])


def _full_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    return [TensorType(tuple(a["shape"]), _dtype_attr(a))]


def _cast_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    return [ctx.cast(value(cts[0]), dtype=op.operands[0].tensor.dtype)]


def _where_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    c, x, y = tensor(types[0], "condition"), float_tensor(types[1]), float_tensor(types[2])
    if c.dtype != "bool" or x.dtype != y.dtype:
        raise TypeRuleError(f"where needs a bool condition and equal dtypes, got {c}, {x}, {y}")
    return [TensorType(broadcast_shapes(broadcast_shapes(c.shape, x.shape), y.shape), x.dtype)]


def _where_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    c = ctx.primal(op.operands[0])
    g = value(cts[0])
    zero = ctx.zeros(g.type)
    return [
        ZERO,
        ctx.unbroadcast(ctx.where(c, g, zero), op.operands[1]) if needed[1] else ZERO,
        ctx.unbroadcast(ctx.where(c, zero, g), op.operands[2]) if needed[2] else ZERO,
    ]


register(
    OpDef(
        "full",
        _full_infer,
        lambda xp, shape, value, dtype: xp.full(tuple(shape), value, dtype=xp_dtype(xp, dtype)),
        None,
        nargs=0,
        attrs={"shape": "ints", "value": "float", "dtype": "dtype"},
        defaults={"dtype": "f64"},
        family="creation",
    ),
    OpDef(
        "full_like",
        lambda types, a, blocks: [tensor(types[0])],
        lambda xp, x, value: xp.full_like(x, value),
        None,
        attrs={"value": "float"},
        differentiable=(),
        family="creation",
    ),
    OpDef(
        "cast",
        lambda types, a, blocks: [TensorType(tensor(types[0]).shape, _dtype_attr(a))],
        lambda xp, x, dtype: xp.astype(x, xp_dtype(xp, dtype)),
        _cast_vjp,
        attrs={"dtype": "dtype"},
        view=True,
        family="misc",
    ),
    OpDef(
        "assign",
        lambda types, a, blocks: [tensor(types[0])],
        lambda xp, x: x,
        lambda ctx, op, cts, needed: [value(cts[0])],
        view=True,
        family="misc",
    ),
    OpDef(
        "where",
        _where_infer,
        lambda xp, c, x, y: xp.where(c, x, y),
        _where_vjp,
        nargs=3,
        differentiable=(1, 2),
        family="misc",
    ),
)


# --- comparisons: forward-only, their margin to a tie is a kink ------------------------------------


def _compare_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x, y = tensor(types[0], "lhs"), tensor(types[1], "rhs")
    if x.dtype != y.dtype:
        raise TypeRuleError(f"dtypes differ: {x} and {y}")
    return [TensorType(broadcast_shapes(x.shape, y.shape), "bool")]


for _name, _fn in {
    "less_than": lambda xp, a, b: a < b,
    "less_equal": lambda xp, a, b: a <= b,
    "greater_than": lambda xp, a, b: a > b,
    "greater_equal": lambda xp, a, b: a >= b,
}.items():
    register(OpDef(_name, _compare_infer, _fn, None, nargs=2, forward_only=True, kink=at_tie, family="compare"))
