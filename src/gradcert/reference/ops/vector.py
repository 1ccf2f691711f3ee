"""Vector ops: tuples of tensors (`combine`/`split`) and the ops that take or return them.

A vector value's cotangent is a vector value. `combine` and `split` are structural: the VJP of
one is the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gradcert.reference.ir.types import TensorType, Type, VectorType
from gradcert.reference.ops.base import OpDef, TypeRuleError, norm_axes, register, tensor
from gradcert.reference.ops.vjp import cotangents, packed, value

A = dict[str, Any]


def _vector(t: Type) -> VectorType:
    if not isinstance(t, VectorType):
        raise TypeRuleError(f"operand must be a vector, got {t}")
    return t


def _combine_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    return [VectorType(tuple(tensor(t, f"element {i}") for i, t in enumerate(types)))]


def _concat_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    v = _vector(types[0])
    if not v.elems:
        raise TypeRuleError("concat of an empty vector")
    first = v.elems[0]
    (ax,) = norm_axes([a["axis"]], first.rank)
    for e in v.elems:
        if (
            e.dtype != first.dtype
            or e.rank != first.rank
            or any(d != f for i, (d, f) in enumerate(zip(e.shape, first.shape)) if i != ax)
        ):
            raise TypeRuleError(f"cannot concat {e} with {first} on axis {ax}")
    shape = list(first.shape)
    shape[ax] = sum(e.shape[ax] for e in v.elems)
    return [TensorType(tuple(shape), first.dtype)]


def _sections_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x = tensor(types[0])
    (ax,) = norm_axes([a["axis"]], x.rank)
    sections = list(a["sections"])
    if sum(sections) != x.shape[ax] or min(sections, default=0) <= 0:
        raise TypeRuleError(f"sections {sections} do not partition axis {ax} of {x}")
    return [VectorType(tuple(TensorType(x.shape[:ax] + (s,) + x.shape[ax + 1 :], x.dtype) for s in sections))]


def _same_elems(v: VectorType) -> TensorType:
    if not v.elems or any(e != v.elems[0] for e in v.elems):
        raise TypeRuleError(f"elements must share one type, got {v}")
    return v.elems[0]


def _stack_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    e = _same_elems(_vector(types[0]))
    (ax,) = norm_axes([a["axis"]], e.rank + 1)
    return [TensorType(e.shape[:ax] + (len(_vector(types[0]).elems),) + e.shape[ax:], e.dtype)]


def _unbind_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x = tensor(types[0])
    (ax,) = norm_axes([a["axis"]], x.rank)
    e = TensorType(x.shape[:ax] + x.shape[ax + 1 :], x.dtype)
    return [VectorType((e,) * x.shape[ax])]


def _split_kernel(xp: Any, v: Any) -> Any:
    return tuple(v)


def _sections_kernel(xp: Any, x: Any, sections: Sequence[int], axis: int) -> Any:
    out, start = [], 0
    for s in sections:
        idx = [slice(None)] * x.ndim
        idx[axis % x.ndim] = slice(start, start + s)
        out.append(x[tuple(idx)])
        start += s
    return tuple(out)


def _unbind_kernel(xp: Any, x: Any, axis: int) -> Any:
    ax = axis % x.ndim
    lead = (slice(None),) * ax
    return tuple(x[(*lead, i, ...)] for i in range(x.shape[ax]))


register(
    OpDef(
        "combine",
        _combine_infer,
        lambda xp, *xs: tuple(xs),
        lambda ctx, op, cts, needed: ctx.split_vector(packed(cts[0])),
        nargs=None,
        view=True,
        structural="pack",
        family="vector",
    ),
    OpDef(
        "split",
        lambda types, a, blocks: list(_vector(types[0]).elems),
        _split_kernel,
        lambda ctx, op, cts, needed: [ctx.parts(cotangents(cts), op.operands[0].type)],
        view=True,
        multi=True,
        structural="unpack",
        family="vector",
    ),
    OpDef(
        "concat",
        _concat_infer,
        lambda xp, v, axis: xp.concat(list(v), axis=axis),
        lambda ctx, op, cts, needed: [
            ctx.split_with_sections(
                value(cts[0]),
                sections=[e.shape[op.attrs["axis"] % e.rank] for e in op.operands[0].vector.elems],
                axis=op.attrs["axis"],
            )
        ],
        attrs={"axis": "int"},
        defaults={"axis": 0},
        family="vector",
    ),
    OpDef(
        "split_with_sections",
        _sections_infer,
        _sections_kernel,
        lambda ctx, op, cts, needed: [ctx.concat(value(cts[0]), axis=op.attrs["axis"])],
        attrs={"sections": "ints", "axis": "int"},
        defaults={"axis": 0},
        view=True,
        family="vector",
    ),
    OpDef(
        "stack",
        _stack_infer,
        lambda xp, v, axis: xp.stack(list(v), axis=axis),
        lambda ctx, op, cts, needed: [ctx.unbind(value(cts[0]), axis=op.attrs["axis"])],
        attrs={"axis": "int"},
        defaults={"axis": 0},
        family="vector",
    ),
    OpDef(
        "unbind",
        _unbind_infer,
        _unbind_kernel,
        lambda ctx, op, cts, needed: [ctx.stack(value(cts[0]), axis=op.attrs["axis"])],
        attrs={"axis": "int"},
        defaults={"axis": 0},
        view=True,
        family="vector",
    ),
    OpDef(
        "add_n",
        lambda types, a, blocks: [_same_elems(_vector(types[0]))],
        lambda xp, v: sum(v[1:], v[0]),
        lambda ctx, op, cts, needed: [
            ctx.parts([value(cts[0])] * len(op.operands[0].vector.elems), op.operands[0].type)
        ],
        family="vector",
    ),
)
