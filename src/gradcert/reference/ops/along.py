"""Ops along axes where backward rules go wrong: the softmax family, scans, and reductions and
selections that pick elements (max, min, prod, topk, p_norm).

Ties. Where a tie decides which element a gradient goes to (`max`, `min`, `topk`, `p_norm` at
p = inf), frameworks differ (Paddle gives each tied element the whole gradient, PyTorch's `amax`
and JAX split it evenly, `topk` picks by position) and finite differences see none of them: the
function has no derivative there. So a tie is a kink: the op's `kink` gives every element's signed
distance to the nearest tie, generators draw these ops only where it keeps MARGIN, and a reference
rule holds exactly away from ties. Zeros are not kinks of `prod` and `cumprod`: their rules use
products of the other elements, never a division by the element.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gradcert.reference.ir import Operation
from gradcert.reference.ir.types import TensorType, Type
from gradcert.reference.ops.base import OpDef, TypeRuleError, float_tensor, norm_axes, register
from gradcert.reference.ops.structure import _axes, _red, _red_def, _reduce_infer, _reduced
from gradcert.reference.ops.vjp import ZERO, Cotangent, Incoming, VjpContext, Zero, value

A = dict[str, Any]


def _axis(x: TensorType, a: A) -> int:
    if x.rank == 0:
        raise TypeRuleError(f"an op along an axis needs a tensor of rank >= 1, got {x}")
    (ax,) = norm_axes([a["axis"]], x.rank)
    return ax


def _same_along(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x = float_tensor(types[0])
    _axis(x, a)
    return [x]


def _keep(ctx: VjpContext, op: Operation, v: Any) -> Any:
    """A reduction's result (or its cotangent) reshaped to keep the reduced axes as 1s."""
    _, keep = _reduced(op.operands[0].tensor, op.attrs["axes"], op.attrs["keepdim"])
    return v if v.tensor.shape == keep else ctx.reshape(v, shape=list(keep))


def _spread(ctx: VjpContext, op: Operation, g: Any) -> Any:
    """A reduction's cotangent broadcast back over the reduced axes."""
    return ctx.expand(_keep(ctx, op, g), shape=list(op.operands[0].tensor.shape))


def _elements(ctx: VjpContext, v: Any, axis: int) -> list[Any]:
    return [value(c) for c in ctx.split_vector(ctx.unbind(v, axis=axis))]


# --- the softmax family --------------------------------------------------------------------------


def _softmax(xp: Any, x: Any, axis: int) -> Any:
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    return e / xp.sum(e, axis=axis, keepdims=True)


def _log_softmax(xp: Any, x: Any, axis: int) -> Any:
    z = x - xp.max(x, axis=axis, keepdims=True)
    return z - xp.log(xp.sum(xp.exp(z), axis=axis, keepdims=True))


def _logsumexp(xp: Any, x: Any, axes: Sequence[int], keepdim: bool) -> Any:
    ax = _axes(x, axes)
    m = xp.max(x, axis=ax, keepdims=True)
    out = m + xp.log(xp.sum(xp.exp(x - m), axis=ax, keepdims=True))
    return out if keepdim else xp.reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in ax))


def _softmax_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    # y (g - sum(g y))
    y, g, ax = ctx.primal(op.results[0]), value(cts[0]), op.attrs["axis"]
    return [ctx.multiply(y, ctx.subtract(g, ctx.sum(ctx.multiply(g, y), axes=[ax], keepdim=True)))]


def _log_softmax_vjp(
    ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]
) -> list[Cotangent]:
    # g - softmax(x) sum(g), softmax(x) = exp(y)
    y, g, ax = ctx.primal(op.results[0]), value(cts[0]), op.attrs["axis"]
    return [ctx.subtract(g, ctx.multiply(ctx.exp(y), ctx.sum(g, axes=[ax], keepdim=True)))]


def _logsumexp_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    # g exp(x - out): the softmax over the reduced axes
    x, out = ctx.primal(op.operands[0]), ctx.primal(op.results[0])
    return [ctx.multiply(_keep(ctx, op, value(cts[0])), ctx.exp(ctx.subtract(x, _keep(ctx, op, out))))]


# --- scans ---------------------------------------------------------------------------------------


def _cumsum(xp: Any, x: Any, axis: int, reverse: bool) -> Any:
    if reverse:
        return xp.flip(xp.cumulative_sum(xp.flip(x, axis=axis), axis=axis), axis=axis)
    return xp.cumulative_sum(x, axis=axis)


def _cumprod_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    """d/dx_i of sum_j g_j prod_{k<=j} x_k = E_i R_i, E_i = prod_{k<i} x_k and
    R_i = g_i + x_{i+1} R_{i+1}: products of the other elements only, right where some are 0."""
    ax = op.attrs["axis"] % op.operands[0].tensor.rank
    xs, gs = _elements(ctx, ctx.primal(op.operands[0]), ax), _elements(ctx, value(cts[0]), ax)
    n = len(xs)
    r = [gs[-1]] * n
    for i in range(n - 2, -1, -1):
        r[i] = ctx.add(gs[i], ctx.multiply(xs[i + 1], r[i + 1]))
    grads, e = [r[0]], xs[0]
    for i in range(1, n):
        grads.append(ctx.multiply(e, r[i]))
        if i + 1 < n:
            e = ctx.multiply(e, xs[i])
    return [ctx.stack(ctx.combine(*grads), axis=ax)]


# --- reductions that pick or multiply elements ----------------------------------------------------


def _tie_distance(xp: Any, x: Any, ax: tuple[int, ...]) -> Any:
    """Per element: x minus the largest other element of its group. Positive only at a unique
    maximum; its least magnitude is the gap between the two largest (0 at a tie)."""
    m = xp.max(x, axis=ax, keepdims=True)
    top = x == m
    count = xp.sum(xp.astype(top, x.dtype), axis=ax, keepdims=True)
    others = xp.where(top, xp.full_like(x, -float("inf")), x)
    second = xp.where(count > 1, m, xp.max(others, axis=ax, keepdims=True))
    return x - xp.where(top, second, m)


def _extremum_kink(sign: float) -> Any:
    def kink(xp: Any, x: Any, axes: Sequence[int], keepdim: bool) -> Any:
        return _tie_distance(xp, sign * x, _axes(x, axes))

    return kink


def _extremum_vjp(compare: str) -> Any:
    def vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
        x, t = ctx.primal(op.operands[0]), op.operands[0].tensor
        chosen = ctx.cast(ctx.emit(compare, x, _keep(ctx, op, ctx.primal(op.results[0]))), dtype=t.dtype)
        return [ctx.multiply(_spread(ctx, op, value(cts[0])), chosen)]

    return vjp


def _prod_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    """g times the product of the other elements of each group (prefix times suffix products):
    the reduced axes moved last and flattened, taken apart, and put back."""
    t = op.operands[0].tensor
    red = norm_axes(op.attrs["axes"], t.rank) if op.attrs["axes"] else tuple(range(t.rank))
    kept = [i for i in range(t.rank) if i not in red]
    n = TensorType(tuple(t.shape[i] for i in red)).size
    if n == 1:
        return [_spread(ctx, op, value(cts[0]))]
    perm = [*kept, *red]
    x = ctx.primal(op.operands[0])
    if perm != list(range(t.rank)):
        x = ctx.transpose(x, perm=perm)
    lead = [t.shape[i] for i in kept]
    xs = _elements(ctx, ctx.reshape(x, shape=[*lead, n]), len(lead))
    g = ctx.reshape(value(cts[0]), shape=lead)
    before: list[Any] = [None] * n  # products of the elements before i (None: empty)
    after: list[Any] = [None] * n
    for i in range(1, n):
        before[i] = xs[i - 1] if before[i - 1] is None else ctx.multiply(before[i - 1], xs[i - 1])
        j = n - 1 - i
        after[j] = xs[j + 1] if after[j + 1] is None else ctx.multiply(after[j + 1], xs[j + 1])
    grads = []
    for b, a in zip(before, after):
        others = a if b is None else b if a is None else ctx.multiply(b, a)
        grads.append(ctx.multiply(g, others))
    out = ctx.reshape(ctx.stack(ctx.combine(*grads), axis=len(lead)), shape=[t.shape[i] for i in perm])
    if perm != list(range(t.rank)):
        out = ctx.transpose(out, perm=[perm.index(i) for i in range(t.rank)])
    return [out]


# --- topk ----------------------------------------------------------------------------------------


def _topk_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    x = float_tensor(types[0])
    ax = _axis(x, a)
    if not 1 <= a["k"] <= x.shape[ax]:
        raise TypeRuleError(f"k={a['k']} out of range for axis {ax} of {x}")
    shape = x.shape[:ax] + (a["k"],) + x.shape[ax + 1 :]
    return [TensorType(shape, x.dtype), TensorType(shape, "i64")]


def _topk(xp: Any, x: Any, k: int, axis: int, largest: bool) -> Any:
    order = xp.argsort(-x if largest else x, axis=axis, stable=True)  # (NumPy's has no `descending`)
    ax = axis % x.ndim
    idx = order[(slice(None),) * ax + (slice(0, k),)]
    return xp.take_along_axis(x, idx, axis=ax), idx


def _pairwise_kink(xp: Any, x: Any, k: int, axis: int, largest: bool) -> Any:
    """Every pair of elements along the axis compared: their signs are the order that decides
    which elements are chosen, and where."""
    a = xp.expand_dims(x, axis=axis % x.ndim)
    b = xp.expand_dims(x, axis=axis % x.ndim + 1)
    n = x.shape[axis]
    d = a - b
    off = xp.reshape(
        xp.arange(n)[:, None] < xp.arange(n)[None, :],
        (1,) * (axis % x.ndim) + (n, n) + (1,) * (x.ndim - axis % x.ndim - 1),
    )
    return xp.where(off, d, xp.full_like(d, float("inf")))


def _topk_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    if isinstance(cts[0], Zero):
        return [ZERO]
    t = op.operands[0].tensor
    where = ctx.primal(op.results[1])
    return [ctx.put_along_axis(ctx.zeros(t), where, value(cts[0]), axis=op.attrs["axis"], reduce="add")]


# --- p_norm --------------------------------------------------------------------------------------


def _p_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    if a["p"] not in (1.0, 2.0, float("inf")):
        raise TypeRuleError(f"p_norm takes p = 1, 2 or inf, got {a['p']}")
    x = float_tensor(types[0])
    out, _ = _reduced(x, [_axis(x, a)], a["keepdim"])
    return [TensorType(out, x.dtype)]


def _p_norm(xp: Any, x: Any, p: float, axis: int, keepdim: bool) -> Any:
    if p == 1.0:
        return xp.sum(xp.abs(x), axis=axis, keepdims=keepdim)
    if p == 2.0:
        return xp.sqrt(xp.sum(x * x, axis=axis, keepdims=keepdim))
    return xp.max(xp.abs(x), axis=axis, keepdims=keepdim)


def _p_norm_kink(xp: Any, x: Any, p: float, axis: int, keepdim: bool) -> Any:
    """p = 1: each element's 0; p = 2: the norm's 0; p = inf: a tie of the largest |x|, and 0."""
    if p == 1.0:
        return x
    if p == 2.0:
        return _p_norm(xp, x, 2.0, axis, True)
    return xp.concat([xp.reshape(_tie_distance(xp, xp.abs(x), (axis % x.ndim,)), (-1,)), xp.reshape(x, (-1,))])


def _p_norm_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    t = op.operands[0].tensor
    ax, p = op.attrs["axis"] % t.rank, op.attrs["p"]
    x, out = ctx.primal(op.operands[0]), ctx.primal(op.results[0])
    keep = [1 if i == ax else d for i, d in enumerate(t.shape)]
    g = ctx.expand(ctx.reshape(value(cts[0]), shape=keep), shape=list(t.shape))
    norm = ctx.reshape(out, shape=keep)
    if p == 2.0:  # x / |x|
        return [ctx.multiply(g, ctx.divide(x, norm))]
    d = ctx.sign(x)
    if p != 1.0:  # sign(x) where |x| is the largest
        d = ctx.multiply(d, ctx.cast(ctx.greater_equal(ctx.abs(x), norm), dtype=t.dtype))
    return [ctx.multiply(g, d)]


def _reduction(name: str, kernel: Any, vjp: Any, kink: Any = None) -> OpDef:
    return OpDef(name, _reduce_infer, kernel, vjp, attrs=_red, defaults=_red_def, kink=kink, family="reduction")


register(
    OpDef("softmax", _same_along, _softmax, _softmax_vjp, attrs={"axis": "int"}, defaults={"axis": -1}, family="along"),
    OpDef(
        "log_softmax",
        _same_along,
        _log_softmax,
        _log_softmax_vjp,
        attrs={"axis": "int"},
        defaults={"axis": -1},
        family="along",
    ),
    OpDef(
        "cumsum",
        _same_along,
        _cumsum,
        lambda ctx, op, cts, needed: [
            ctx.cumsum(value(cts[0]), axis=op.attrs["axis"], reverse=not op.attrs["reverse"])
        ],
        attrs={"axis": "int", "reverse": "bool"},
        defaults={"reverse": False},
        family="along",
    ),
    OpDef(
        "cumprod",
        _same_along,
        lambda xp, x, axis: xp.cumulative_prod(x, axis=axis),
        _cumprod_vjp,
        attrs={"axis": "int"},
        family="along",
    ),
    OpDef(
        "topk",
        _topk_infer,
        _topk,
        _topk_vjp,
        attrs={"k": "int", "axis": "int", "largest": "bool"},
        defaults={"axis": -1, "largest": True},
        kink=_pairwise_kink,
        multi=True,
        family="along",
    ),
    _reduction("logsumexp", _logsumexp, _logsumexp_vjp),
    _reduction(
        "max",
        lambda xp, x, axes, keepdim: xp.max(x, axis=_axes(x, axes), keepdims=keepdim),
        _extremum_vjp("greater_equal"),
        _extremum_kink(1.0),
    ),
    _reduction(
        "min",
        lambda xp, x, axes, keepdim: xp.min(x, axis=_axes(x, axes), keepdims=keepdim),
        _extremum_vjp("less_equal"),
        _extremum_kink(-1.0),
    ),
    _reduction("prod", lambda xp, x, axes, keepdim: xp.prod(x, axis=_axes(x, axes), keepdims=keepdim), _prod_vjp),
    OpDef(
        "p_norm",
        _p_infer,
        _p_norm,
        _p_norm_vjp,
        attrs={"p": "float", "axis": "int", "keepdim": "bool"},
        defaults={"axis": -1, "keepdim": False},
        kink=_p_norm_kink,
        family="reduction",
    ),
)
