"""Control flow: `if`, `while` and the `yield` that ends their blocks.

    if(c: bool[]) {then: () -> (T...)} {else: () -> (T...)} -> (T...)
    while(x: T...) {cond(a: T...) -> (bool[])} {body(a: T...) -> (T...)} -> (T...)

Blocks read values of enclosing blocks directly ("captures"). A region op's VJP receives, per
result, the list of its cotangent contributions (None: zero) and sums only what it uses; it
returns one cotangent per operand and then one per captured value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gradcert.reference.ir import Block, Operation, Value
from gradcert.reference.ir.types import TensorType, Type, is_differentiable
from gradcert.reference.ops.base import OpDef, TypeRuleError, register
from gradcert.reference.ops.vjp import ZERO, Cotangent, Incoming, VjpContext, Zero, built, contributions, value

A = dict[str, Any]
RunBlock = Callable[[Any, Sequence[bool]], list[bool]]


def _yield_types(block: Any, label: str) -> list[Type]:
    term = block.terminator
    if term is None:
        raise TypeRuleError(f"block ^{label} does not end with yield")
    return [v.type for v in term.operands]


def _yielded(block: Block) -> list[Value]:
    term = block.terminator
    assert term is not None  # (a verified program's blocks end with yield)
    return term.operands


def _made(stack: Value | None) -> Value:
    assert stack is not None  # (a loop's backward block counts its trips on its stack)
    return stack


def _scalar_bool(t: Type, what: str) -> None:
    if t != TensorType((), "bool"):
        raise TypeRuleError(f"{what} must be bool[], got {t}")


# --- if ------------------------------------------------------------------------------------------


def _if_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    _scalar_bool(types[0], "condition")
    then, other = _yield_types(blocks[0], "then"), _yield_types(blocks[1], "else")
    if then != other:
        raise TypeRuleError(
            f"branches yield different types: ({', '.join(map(str, then))}) and ({', '.join(map(str, other))})"
        )
    return then


def _if_run(interp: Any, op: Any, args: Sequence[Any]) -> list[Any]:
    taken = interp.truth(args[0])
    interp.record(op, taken)
    out: list[Any] = interp.run_block(op.blocks[0 if taken else 1], [])
    return out


def _if_flow(op: Any, mask: Sequence[bool], run_block: RunBlock) -> list[bool]:
    a, b = run_block(op.blocks[0], []), run_block(op.blocks[1], [])
    return [x or y for x, y in zip(a, b)]


def _if_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    # if(c) {then} {else}  ->  if(c) {then: pop; bwd(then); yield(ct caps)} {else: ...}
    caps = op.captures()
    wanted = [c for c, n in zip(caps, needed[1:]) if n]
    subs, gots = [], []
    for blk in op.blocks:
        sub = ctx.region(blk)
        gots.append(sub.backprop(zip(_yielded(blk), map(contributions, cts)), wanted))
        subs.append(sub)
    keep = [i for i in range(len(wanted)) if any(not isinstance(g[i], Zero) for g in gots)]
    if not keep and not any(sub.has_effects() for sub in subs):  # (second order pushes are effects)
        return [ZERO] * (1 + len(caps))
    for sub, got in zip(subs, gots):
        sub.finish([built(sub, got[i], wanted[i].type) for i in keep])
    results = ctx.emit_region("if", [ctx.primal(op.operands[0])], [s.block for s in subs])
    by_cap = {wanted[i]: r for i, r in zip(keep, results)}
    return [ZERO, *(by_cap.get(c, ZERO) for c in caps)]


# --- while ---------------------------------------------------------------------------------------


def _while_infer(types: Sequence[Type], a: A, blocks: Sequence[Any]) -> list[Type]:
    if not types:
        raise TypeRuleError("while needs at least one loop-carried value")
    cond = _yield_types(blocks[0], "cond")
    if len(cond) != 1:
        raise TypeRuleError(f"^cond must yield one bool[], yields {len(cond)} values")
    _scalar_bool(cond[0], "^cond's yield")
    body = _yield_types(blocks[1], "body")
    if body != list(types):
        raise TypeRuleError(f"^body yields ({', '.join(map(str, body))}), loop carries ({', '.join(map(str, types))})")
    return list(types)


def _while_run(interp: Any, op: Any, args: Sequence[Any]) -> list[Any]:
    cond, body = op.blocks
    vals, trips = list(args), 0
    while interp.truth(interp.run_block(cond, vals)[0]):
        trips += 1
        if trips > interp.trip_limit:
            raise interp.error(op, f"while exceeded the trip limit of {interp.trip_limit}")
        vals = interp.run_block(body, vals)
    interp.record(op, trips)
    return [interp.copy(v) for v in vals]


def _while_flow(op: Any, mask: Sequence[bool], run_block: RunBlock) -> list[bool]:
    m = list(mask)
    while True:
        run_block(op.blocks[0], m)
        y = run_block(op.blocks[1], m)
        new = [a or b for a, b in zip(m, y)]
        if new == m:
            return m
        m = new


def _carried(ctx: VjpContext, op: Operation, cts: Sequence[Any]) -> list[int]:
    """Loop-carried positions whose cotangent can be nonzero on some trip (a fixpoint). Cotangents
    enter a trip through the yields and, under second order, through the body's pushes."""
    body = op.blocks[1]
    live = [j for j, a in enumerate(body.args) if is_differentiable(a.type) and ctx.reachable(a)]
    yielded = _yielded(body)
    sinks = ctx.effect_sinks(body)
    deps, on = {}, set()
    for j in live:
        reached = ctx.depends(body, [body.args[j]])
        deps[j] = [v in reached for v in yielded]
        if contributions(cts[j]) or any(v in reached for v in sinks):
            on.add(j)
    grew = True
    while grew:
        grew = False
        for j in live:
            if j not in on and any(deps[j][i] for i in on):
                on.add(j)
                grew = True
    return sorted(on)


def _while_vjp(ctx: VjpContext, op: Operation, cts: Sequence[Incoming], needed: Sequence[bool]) -> list[Cotangent]:
    # while(x) {cond(a)} {body(a): yield(b)}  ->  the same number of trips, newest first:
    #   while(g, acc) {cond(g, acc): has_elements(stack)}
    #                 {body(g, acc): pop; bwd(body); yield(ct a, acc + ct caps)}
    # The forward body pushes once per trip, so the stack also counts the trips.
    body = op.blocks[1]
    n = len(op.operands)
    caps = op.captures()
    wanted = [c for c, nd in zip(caps, needed[n:]) if nd]
    carried = _carried(ctx, op, cts)
    sub = ctx.region(body)
    gs = [sub.add_arg(op.results[j].type) for j in carried]
    got = sub.backprop(
        [(_yielded(body)[j], [g]) for j, g in zip(carried, gs)],
        [body.args[j] for j in carried] + wanted,
    )
    got_args, got_caps = got[: len(carried)], got[len(carried) :]
    kept = [k for k, g in enumerate(got_caps) if not isinstance(g, Zero)]
    if not carried and not kept and not sub.has_effects():
        return [ZERO] * (n + len(caps))
    accs = [sub.add_arg(wanted[k].type) for k in kept]
    stack = sub.finish(
        [built(sub, g, op.results[j].type) for j, g in zip(carried, got_args)]
        + [sub.add(acc, value(got_caps[k])) for acc, k in zip(accs, kept)],
        count_trips=True,
    )
    cond = ctx.new_block(
        "cond", [v.type for v in sub.block.args], lambda b, *args: [b.has_elements(ctx.primal(_made(stack)))]
    )
    totals = [ctx.total(contributions(cts[j])) for j in carried]
    inits = [built(ctx, t, op.results[j].type) for j, t in zip(carried, totals)]
    inits += [ctx.zeros(wanted[k].type) for k in kept]
    results = ctx.emit_region("while", inits, [cond, sub.block])
    out: list[Cotangent] = [ZERO] * (n + len(caps))
    for j, r in zip(carried, results):
        out[j] = r
    for k, r in zip(kept, results[len(carried) :]):
        out[n + caps.index(wanted[k])] = r
    return out


register(
    OpDef(
        "if",
        _if_infer,
        None,
        _if_vjp,
        regions=("then", "else"),
        block_args=lambda types: [[], []],
        run=_if_run,
        flow=_if_flow,
        differentiable=(),
        multi=True,
        family="control",
    ),
    OpDef(
        "while",
        _while_infer,
        None,
        _while_vjp,
        nargs=None,
        regions=("cond", "body"),
        block_args=lambda types: [list(types), list(types)],
        run=_while_run,
        flow=_while_flow,
        multi=True,
        family="control",
    ),
    OpDef("yield", lambda types, a, blocks: [], None, None, nargs=None, forward_only=True, family="control"),
)
