"""Stacks: how the backward of `if` and `while` saves forward values for later.

`stack_create` makes an empty LIFO stack; `tuple_push` saves a tuple of values on it (a forward
loop pushes once per trip); `tuple_pop` takes the newest tuple back (the backward loop pops once
per trip); `has_elements` drives the backward loop's condition. Their VJPs are each other's duals
through a cotangent stack, so a backward program is differentiable again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gradcert.reference.ir import Operation
from gradcert.reference.ir.types import StackType, TensorType, Type
from gradcert.reference.ops.base import OpDef, TypeRuleError, register
from gradcert.reference.ops.vjp import ZERO, Cotangent, Incoming, VjpContext, cotangents

A = dict[str, Any]

DECLARED: Any = object()  # a type rule's answer when the result type is whatever was declared


def _stack(t: Type) -> StackType:
    if not isinstance(t, StackType):
        raise TypeRuleError(f"operand must be a stack, got {t}")
    return t


def _push_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    s = _stack(types[0])
    if tuple(types[1:]) != s.elems:
        raise TypeRuleError(f"pushed types ({', '.join(map(str, types[1:]))}) differ from {s}")
    return []


def _push(xp: Any, stack: list[Any], *values: Any) -> tuple[()]:
    stack.append(values)
    return ()


def _pop(xp: Any, stack: list[Any]) -> Any:
    if not stack:
        raise RuntimeError("tuple_pop from an empty stack")
    return stack.pop()


def _push_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    return [ZERO, *ctx.pop_cotangents(op)]


def _pop_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    ctx.push_cotangents(op, cotangents(cts))
    return [ZERO]


register(
    OpDef(
        "stack_create",
        lambda types, a, blocks: [DECLARED],
        lambda xp: [],
        None,
        nargs=0,
        effects=True,
        family="stack",
    ),
    OpDef(
        "tuple_push", _push_infer, _push, _push_vjp, nargs=None, writes=(0,), effects=True, multi=True, family="stack"
    ),
    OpDef(
        "tuple_pop",
        lambda types, a, blocks: list(_stack(types[0]).elems),
        _pop,
        _pop_vjp,
        effects=True,
        multi=True,
        family="stack",
    ),
    OpDef(
        "has_elements",
        lambda types, a, blocks: [_stack(types[0]) and TensorType((), "bool")],
        lambda xp, stack: xp.asarray(len(stack) > 0),
        None,
        forward_only=True,
        family="stack",
    ),
)
