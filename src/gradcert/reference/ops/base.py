"""The op definition record and the registry every layer looks ops up in."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gradcert.reference.ir.types import TensorType, Type
from gradcert.reference.ops.vjp import Vjp as Vjp

Kernel = Callable[..., Any]
# infer(operand_types, attrs, blocks) -> result types; raises TypeRuleError.
Infer = Callable[[Sequence[Type], dict[str, Any], Sequence[Any]], list[Type]]
Interval = tuple[float, float]


class TypeRuleError(Exception):
    """An op's operands or attributes break its signature or type rule."""


@dataclass(frozen=True)
class Signature:
    """What the IR reads (the builder, parser and verifier): operands, attributes, nested blocks."""

    nargs: int | None = 1  # None: variadic
    attrs: dict[str, str] = field(default_factory=dict)  # name -> kind: int float bool ints dtype word
    defaults: dict[str, Any] = field(default_factory=dict)
    regions: tuple[str, ...] = ()  # labels of nested blocks
    # operand types -> the argument types of each nested block
    block_args: Callable[[Sequence[Type]], list[list[Type]]] | None = None


@dataclass(frozen=True)
class Execution:
    """What the interpreter (and a lowering) reads, beside the kernel."""

    run: Callable[..., Any] | None = None  # region/effect ops: run(interp, op, args) -> results
    multi: bool = False  # the kernel returns a tuple, one entry per result
    view: bool = False  # kernel may alias an operand's buffer: the interpreter copies
    effects: bool = False  # has side effects: never dead, even with unused results
    writes: tuple[int, ...] = ()  # operands whose state the op changes (stacks)


@dataclass(frozen=True)
class Differentiation:
    """What the backward and its pruning read, beside the VJP rule."""

    differentiable: tuple[int, ...] | None = None  # operand positions with gradients; None: all
    forward_only: bool = False  # never differentiated (comparisons, counters, stack queries)
    inplace_of: int | None = None  # operand whose buffer the result overwrites
    base: str | None = None  # for an in-place variant, its out-of-place op
    # "pack": result element i is operand i (combine); "unpack": result i is element i (split).
    # Pruning follows vector elements one by one through these.
    structural: str = ""
    flow: Callable[..., list[bool]] | None = None  # region ops: reachability through blocks


@dataclass(frozen=True)
class Drawing:
    """What the generators read."""

    domain: tuple[Interval | None, ...] = ()  # per operand: where the op is safe and smooth
    # xp, *args, **attrs -> signed distances to the non-smooth points near which the op is drawn
    # (a kink, a tie): its signs tell the smooth pieces apart, its least magnitude is the margin
    kink: Kernel | None = None
    family: str = ""


@dataclass(frozen=True, init=False)
class OpDef:
    """One op: its type rule, kernel and VJP rule, and the rest grouped by the layer that reads it.
    Written as one flat record (`OpDef(name, infer, kernel, vjp, nargs=2, domain=..., ...)`)."""

    name: str
    infer: Infer
    kernel: Kernel | None
    vjp: Vjp | None
    signature: Signature
    execution: Execution
    autodiff: Differentiation
    drawing: Drawing

    def __init__(
        self,
        name: str,
        infer: Infer,
        kernel: Kernel | None = None,
        vjp: Vjp | None = None,
        **fields: Any,
    ) -> None:
        # a group's fields, flat; or a whole group (as `dataclasses.replace` hands them back)
        for attr, group in _GROUPS.items():
            whole = fields.pop(attr, None)
            flat = {k: fields.pop(k) for k in list(fields) if k in group.__dataclass_fields__}
            object.__setattr__(self, attr, replace(whole, **flat) if whole is not None else group(**flat))
        if fields:
            raise TypeError(f"op {name!r}: unknown fields {sorted(fields)}")
        for k, v in [("name", name), ("infer", infer), ("kernel", kernel), ("vjp", vjp)]:
            object.__setattr__(self, k, v)

    def is_differentiable_operand(self, i: int) -> bool:
        if self.autodiff.forward_only:
            return False
        return self.autodiff.differentiable is None or i in self.autodiff.differentiable


_GROUPS: dict[str, Any] = {
    "signature": Signature,
    "execution": Execution,
    "autodiff": Differentiation,
    "drawing": Drawing,
}
OPS: dict[str, OpDef] = {}
INPLACE: set[str] = set()  # the ops that overwrite an operand (`inplace_of`): a quick test for the verifier


# The kinks ops share (one function each, so that a generator can tell two ops' kinks are one):
def at_zero(xp: Any, x: Any, **attrs: Any) -> Any:
    """Non-smooth where the operand is 0 (abs, relu, sign)."""
    return x


def at_tie(xp: Any, a: Any, b: Any, **attrs: Any) -> Any:
    """Non-smooth where the two operands tie (maximum, minimum, comparisons)."""
    return a - b


def register(*defs: OpDef) -> None:
    for d in defs:
        if d.name in OPS:
            raise ValueError(f"op {d.name!r} defined twice")
        OPS[d.name] = d
        if d.autodiff.inplace_of is not None:
            INPLACE.add(d.name)


def lookup(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise TypeRuleError(f"unknown op '{name}'") from None


def inplace_variant(base: OpDef, operand: int = 0) -> OpDef:
    """`base` overwriting operand `operand`: same kernel and VJP, result typed as that operand."""

    def infer(types: Sequence[Type], attrs: dict[str, Any], blocks: Sequence[Any]) -> list[Type]:
        (out,) = base.infer(types, attrs, blocks)
        if out != types[operand]:
            raise TypeRuleError(f"in-place result {out} differs from the overwritten operand's type {types[operand]}")
        return [out]

    variant = copy.copy(base)
    object.__setattr__(variant, "name", base.name + "_")
    object.__setattr__(variant, "infer", infer)
    object.__setattr__(variant, "autodiff", replace(base.autodiff, inplace_of=operand, base=base.name))
    return variant


def tensor(t: Type, what: str = "operand") -> TensorType:
    if not isinstance(t, TensorType):
        raise TypeRuleError(f"{what} must be a tensor, got {t}")
    return t


def float_tensor(t: Type, what: str = "operand") -> TensorType:
    tt = tensor(t, what)
    if tt.dtype not in ("f64", "f32"):
        raise TypeRuleError(f"{what} must be a float tensor, got {t}")
    return tt


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise TypeRuleError(f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y) if 1 in (x, y) else x)
    return tuple(reversed(out))


def norm_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    out = []
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise TypeRuleError(f"axis {a} out of range for rank {rank}")
        out.append(a % rank if rank else 0)
    if len(set(out)) != len(out):
        raise TypeRuleError(f"repeated axis in {list(axes)}")
    return tuple(sorted(out))
