"""The reference backward: a program transform that appends gradient ops, with the contract of
Paddle's `paddle.autograd.ir_backward.grad` / `append_backward`.

The driver (`_Ctx.run_block`) is one reverse loop over a block's ops that never names an op: it
takes the cotangents of an op's results (summed on read: `add`, or `add_n` for many), asks the
op's VJP rule for its inputs' cotangents, and accumulates them. Each mechanism is a small piece:

- no-grad set and stop_gradient: `_blocked`; pruning: `prune.reachable` (values that depend on the
  inputs) -- a VJP is asked only for inputs on a path, and only ops with a result cotangent run;
- symbolic zeros: a missing cotangent is `ZERO` to a VJP rule (`None` in the environment); a zero
  tensor is made (`full`) only where a VJP or a block boundary needs one, so no zero-fill op is
  ever left unused;
- saving forward values: `_Ctx.primal` -- a value overwritten in place is copied before the
  overwrite; a value defined inside a branch or loop body is pushed on a stack at the end of its
  block and popped at the start of the backward block;
- control flow: the VJP rules of `if` and `while` (ops/control.py) recurse through `region`;
- second order: backward ops are ordinary ops with VJPs; a stack's pops and pushes are duals
  through a cotangent stack (`push_cotangents` / `pop_cotangents`), and a stack saved on another
  stack (a region nested in another) has its cotangent stack saved on the other's likewise.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gradcert.reference.autodiff import prune
from gradcert.reference.collector import paused
from gradcert.reference.ir import Block, Operation, Program, Value
from gradcert.reference.ir.builder import Builder
from gradcert.reference.ir.types import StackType, TensorType, Type, VectorType, is_differentiable
from gradcert.reference.ops import OPS
from gradcert.reference.ops.vjp import (
    ZERO,
    Contributions,
    Cotangent,
    Incoming,
    Parts,
    RegionContext,
    Zero,
    built,
    value,
)


class BackwardError(Exception):
    """The backward cannot be built: a bad request, or a VJP rule that broke its contract."""


@dataclass
class Gradients:
    program: Program
    grads: list[Value | None]  # one per requested input, None where no gradient belongs
    added: set[Operation] = field(default_factory=set)  # every op this transform made
    # the request, as given
    outputs: list[Value] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    no_grad: set[Value] = field(default_factory=set)
    # the forward values that depend on the inputs, as the backward found them to prune
    reach: set[Value] | None = None


@dataclass
class _Shared:
    reach: set[Value]
    blocked: set[Value]
    copies: dict[Value, Value] = field(default_factory=dict)  # overwritten value -> saved copy
    ct_stacks: dict[Value, Value] = field(default_factory=dict)  # stack -> its cotangent stack
    # stack -> the positions of a popped tuple that its cotangent stack's tuples hold, in order
    ct_layout: dict[Value, list[int]] = field(default_factory=dict)
    ct_direct: set[Value] = field(default_factory=set)  # cotangent stacks of backward blocks (`_stack_here`)
    popped: dict[Value, list[Value]] = field(default_factory=dict)  # stack -> what a pop of it gives


class _Ctx(RegionContext):
    """Differentiates one forward block into one backward block (for the top block, itself): the
    context VJP rules are given (`ops/vjp.py` lists what they may use)."""

    def __init__(self, shared: _Shared, fwd: Block, bwd: Block, parent: _Ctx | None) -> None:
        self.shared, self.fwd, self.block, self.parent = shared, fwd, bwd, parent
        self.b = Builder(bwd)
        self.env: dict[Value, list[Value | Parts]] = {}
        self.saved: dict[Value, Value] = {}  # forward value of self.fwd -> its popped stand-in

    # --- emitting ------------------------------------------------------------------------------
    def emit(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.b.one(name, *operands, **attrs)

    def emit_region(self, name: str, operands: Sequence[Value], blocks: Sequence[Block]) -> list[Value]:
        return self.b.op(name, operands, blocks=blocks).results

    def new_block(self, label: str, types: Sequence[Type], fill: Callable[..., Sequence[Value]]) -> Block:
        return self.b.block_of(label, types, fill)

    def zeros(self, t: Type) -> Value:
        if isinstance(t, VectorType):
            return self.b.one("combine", *(self.zeros(e) for e in t.elems))
        assert isinstance(t, TensorType)
        return self.b.one("full", shape=list(t.shape), value=0.0, dtype=t.dtype)

    def add(self, a: Value, b: Value) -> Value:
        if isinstance(a.type, VectorType):
            xs, ys = self.b.op("split", [a]).results, self.b.op("split", [b]).results
            return self.b.one("combine", *(self.add(x, y) for x, y in zip(xs, ys)))
        return self.b.one("add", a, b)

    # A vector's cotangent is kept as its parts (`Parts`, ZERO for a zero part) until something
    # needs it as one value; `combine`'s VJP takes the parts back without ever building it.
    def parts(self, cts: Sequence[Cotangent], type: Type) -> Parts:
        assert isinstance(type, VectorType)
        return Parts(cts, type)

    def split_vector(self, ct: Value | Parts | Zero) -> list[Cotangent]:
        if isinstance(ct, Parts):
            return list(ct)
        return list(self.b.op("split", [value(ct)]).results)

    def materialize(self, ct: Value | Parts | None) -> Value | None:
        if not isinstance(ct, Parts):
            return ct
        return self.b.one("combine", *(built(self, c, t) for c, t in zip(ct, ct.type.elems)))

    def unbroadcast(self, ct: Value, operand: Value) -> Value:
        """Sum `ct` over the axes that broadcasting added to `operand`'s shape."""
        assert isinstance(operand.type, TensorType) and isinstance(ct.type, TensorType)
        to, fr = operand.type.shape, ct.type.shape
        if to == fr:
            return ct
        lead = len(fr) - len(to)
        axes = [*range(lead), *(lead + i for i, d in enumerate(to) if d == 1 and fr[lead + i] != 1)]
        out = self.b.one("sum", ct, axes=axes, keepdim=False) if axes else ct
        return out if out.type == operand.type else self.b.one("reshape", out, shape=list(to))

    # --- cotangent environment: accumulate on write, sum on read ---------------------------------
    def accumulate(self, v: Value, ct: Value | Parts) -> None:
        if ct.type != v.type:
            raise BackwardError(f"cotangent of type {ct.type} for a value of type {v.type}")
        self.env.setdefault(v, []).append(ct)

    def take(self, v: Value) -> Value | Parts | None:
        return self._total(v.type, self.env.pop(v, None))

    def total(self, contributions: Contributions) -> Cotangent:
        """The sum of a region result's cotangent contributions, as one value."""
        if not contributions:
            return ZERO
        return _symbolic(self.materialize(self._total(contributions[0].type, contributions)))

    def _total(self, t: Type, cs: Sequence[Value | Parts] | None) -> Value | Parts | None:
        if not cs:
            return None
        if len(cs) == 1:
            return cs[0]
        ps = [c for c in cs if isinstance(c, Parts)]
        if len(ps) == len(cs):
            assert isinstance(t, VectorType)
            return Parts([_symbolic(self._sum(_values(p[i] for p in ps))) for i in range(len(t.elems))], t)
        vs = [self.materialize(c) for c in cs]
        return self._sum([c for c in vs if c is not None])

    def _sum(self, cs: list[Value]) -> Value | None:
        if len(cs) <= 2 or isinstance(cs[0].type, VectorType):
            acc = cs[0] if cs else None
            for c in cs[1:]:
                acc = self.add(acc, c)  # type: ignore[arg-type]
            return acc
        return self.b.one("add_n", self.b.one("combine", *cs))

    # --- analysis ------------------------------------------------------------------------------
    def reachable(self, v: Value) -> bool:
        return v in self.shared.reach

    def depends(self, block: Block, seeds: Iterable[Value]) -> set[Value]:
        """The values of `block` (nested blocks included) that depend on `seeds`."""
        return prune.reachable(block, seeds, self.shared.blocked)

    def effect_sinks(self, block: Block) -> list[Value]:
        """Values pushed (in `block`, at any depth) on stacks whose cotangent stacks exist:
        under second order, cotangents arrive at them from the cotangent stacks."""
        cts = self.shared.ct_stacks
        return [
            v
            for o in block.walk()
            for i in OPS[o.name].execution.writes
            if o.operands[i] in cts
            for v in o.operands
            if v is not o.operands[i]
        ]

    def _needed(self, v: Value, differentiable_position: bool) -> bool:
        if not differentiable_position or v not in self.shared.reach:
            return False
        return is_differentiable(v.type) or isinstance(v.type, StackType)

    def _effect_active(self, op: Operation) -> bool:
        if not self.shared.ct_stacks:
            return False
        return any(o.operands[i] in self.shared.ct_stacks for o in op.walk() for i in OPS[o.name].execution.writes)

    # --- the driver ----------------------------------------------------------------------------
    def run_block(self, block: Block) -> None:
        for op in list(reversed(block.ops)):
            d = OPS[op.name]
            if (
                not any(r in self.env for r in op.results)
                and not self._effect_active(op)
                and not any(r in self.shared.ct_stacks for r in op.results)  # (a popped stack, below)
            ):
                continue
            inputs = op.operands + (op.captures() if op.blocks else [])
            n = len(op.operands)
            needed = [self._needed(v, i >= n or d.is_differentiable_operand(i)) for i, v in enumerate(inputs)]
            if not any(needed):  # pruned: no input of this op is on a path from the inputs
                for r in op.results:
                    self.env.pop(r, None)
                continue
            self.b.origin = op  # also for the sums that reading the cotangents emits
            cts: list[Incoming]
            if op.blocks:  # a region's VJP sums what it uses, where it uses it (`total`)
                cts = [self.env.pop(r, None) for r in op.results]
            elif d.autodiff.structural == "pack":  # (`combine`: the parts, not built)
                cts = [ZERO if (c := self.take(r)) is None else c for r in op.results]
            else:
                cts = [_symbolic(self.materialize(self.take(r))) for r in op.results]
            if d.vjp is None:
                raise BackwardError(f"op '{op.name}' has no VJP rule")
            got = d.vjp(self, op, cts, needed)
            if len(got) != len(inputs):
                raise BackwardError(f"VJP of '{op.name}' returned {len(got)} cotangent(s) for {len(inputs)} input(s)")
            for v, need, ct in zip(inputs, needed, got):
                if ct is None:
                    raise BackwardError(f"VJP of '{op.name}' returned None (a zero cotangent is ZERO)")
                if need and not isinstance(ct, Zero) and is_differentiable(v.type):
                    self.accumulate(v, ct)

    def backprop(
        self, seeds: Iterable[tuple[Value, Sequence[Value | Parts] | None]], wanted: Sequence[Value]
    ) -> list[Cotangent]:
        """Seed cotangent contributions, run the backward of this context's block, take those of
        `wanted`."""
        for v, cs in seeds:
            if cs and is_differentiable(v.type) and v not in self.shared.blocked:
                for ct in cs:
                    self.accumulate(v, ct)
        self.run_block(self.fwd)
        # the sums of what many uses contributed come from the region op (at the top: none)
        self.b.origin = self.fwd.parent
        return [_symbolic(self.materialize(self.take(w))) for w in wanted]

    # --- saving forward values -----------------------------------------------------------------
    def primal(self, v: Value) -> Value:
        """`v` as the backward block being built can read it (see the module docstring)."""
        v = self._unclobbered(v)
        if self.parent is None:
            return v
        if v.block is self.fwd:
            if v not in self.saved:
                self.saved[v] = Value(v.type)
            return self.saved[v]
        return self.parent.primal(v)

    def _unclobbered(self, v: Value) -> Value:
        copies = self.shared.copies
        if v in copies:
            return copies[v]
        for u in list(v.uses):
            k = OPS[u.name].autodiff.inplace_of
            if k is not None and u.operands[k] is v and u.parent is not None:
                # the copy belongs to the op whose VJP reads `v`, not to the op overwriting it
                copies[v] = Builder(u.parent, u.parent.ops.index(u), origin=self.b.origin).one("assign", v)
                return copies[v]
        return v

    # --- regions -------------------------------------------------------------------------------
    def region(self, fwd: Block) -> _Ctx:
        return _Ctx(self.shared, fwd, Block(fwd.label), self)

    def has_effects(self) -> bool:
        """Whether the backward block built so far holds an op with side effects: it must be
        emitted even when it yields nothing (a second-order push feeds a later pop)."""
        return any(OPS[o.name].execution.effects for o in self.block.walk())

    def add_arg(self, t: Type) -> Value:
        v = Value(t)
        v.owner = self.block
        self.block.args.append(v)
        return v

    def finish(self, yields: Sequence[Value], count_trips: bool = False) -> Value | None:
        """End the backward block with `yields`; push what it read of the forward block at the end
        of that block and pop it at the start of this one. Returns the stack (None if unused)."""
        region = self.fwd.parent
        assert region is not None and region.parent is not None and self.parent is not None
        self.b.origin = region
        self.b.op("yield", yields)
        if not self.saved and not count_trips:
            return None
        values, stand_ins = list(self.saved), list(self.saved.values())
        outer = region.parent
        stack = (
            Builder(outer, outer.ops.index(region), origin=region)
            .op("stack_create", [], result_types=[StackType(tuple(v.type for v in values))])
            .results[0]
        )
        term = self.fwd.terminator
        assert term is not None
        Builder(self.fwd, self.fwd.ops.index(term), origin=region).op("tuple_push", [stack, *values])
        pop = Operation("tuple_pop", [self.parent.primal(stack)], stand_ins)
        pop.origin = region
        self.block.insert(0, pop)
        return stack

    # --- stacks under second order -------------------------------------------------------------
    # A pop's dual pushes the popped values' cotangents on a cotangent stack, and the push's dual
    # pops them back. A stack made by `stack_create` gets its cotangent stack beside it. A stack
    # that was itself popped (the first-order backward of a branch or loop nested in another: the
    # inner region's stack, made once per outer trip, saved on the outer stack) gets a fresh one
    # where it was popped, which then travels as that stack's "cotangent": pushed with the outer
    # pop's cotangents, popped by the outer push's dual, and there the cotangent stack of the stack
    # pushed (`ct_stacks`), for the inner push's dual to pop from.
    def push_cotangents(self, pop: Operation, cts: Sequence[Cotangent]) -> None:
        """VJP of a pop: push the popped values' cotangents on the stack's cotangent stack."""
        stack = pop.operands[0]
        kept = [k for k, r in enumerate(pop.results) if is_differentiable(r.type) or r in self.shared.ct_stacks]
        ct_stack = self.shared.ct_stacks.get(stack)
        if ct_stack is None:
            ct_stack = self._cotangent_stack(stack, pop, [pop.results[k] for k in kept])
            self.shared.ct_layout[stack] = kept
            self.shared.popped[stack] = list(pop.results)
        if self.shared.ct_layout[stack] != kept:
            raise BackwardError(f"the pops of one stack push different cotangents ({pop!r})")
        items = [
            self.shared.ct_stacks[r] if isinstance(r.type, StackType) else built(self, c, r.type)
            for r, c in ((pop.results[k], cts[k]) for k in kept)
        ]
        self.b.op("tuple_push", [self._stack_here(ct_stack), *items])

    def _cotangent_stack(self, stack: Value, pop: Operation, popped: Sequence[Value]) -> Value:
        """A new, empty cotangent stack for `stack`: beside its `stack_create`, or, for a popped
        stack, in the backward block of the block that popped it (before this region's loop)."""
        types = tuple((self.shared.ct_stacks[r] if isinstance(r.type, StackType) else r).type for r in popped)
        if stack.op is not None and stack.op.name == "stack_create":
            blk = stack.op.parent
            assert blk is not None
            at = Builder(blk, blk.ops.index(stack.op) + 1, origin=pop)
        else:
            owner: _Ctx | None = self
            while owner is not None and owner.fwd is not stack.block:
                owner = owner.parent
            if owner is None:
                raise BackwardError(f"stack {stack!r} is popped outside the blocks being differentiated")
            at = owner.b
        ct_stack = at.op("stack_create", [], result_types=[StackType(types)]).results[0]
        if stack.op is None or stack.op.name != "stack_create":  # (made in a backward block)
            self.shared.ct_direct.add(ct_stack)
        self.shared.ct_stacks[stack] = ct_stack
        return ct_stack

    def _stack_here(self, ct_stack: Value) -> Value:
        """A cotangent stack as this block reads it: made beside a forward stack (a forward value),
        or made or popped in an enclosing backward block (read as it is)."""
        return ct_stack if ct_stack in self.shared.ct_direct else self.primal(ct_stack)

    def pop_cotangents(self, push: Operation) -> list[Cotangent]:
        """VJP of a push: pop the cotangents of what it pushed from the cotangent stack; a pushed
        stack's part is its cotangent stack (above)."""
        stack = push.operands[0]
        ct_stack = self.shared.ct_stacks.get(stack)
        pushed = push.operands[1:]
        if ct_stack is None:
            return [ZERO] * len(pushed)
        out: list[Cotangent] = [ZERO] * len(pushed)
        for k, v in zip(self.shared.ct_layout[stack], self.b.op("tuple_pop", [self._stack_here(ct_stack)]).results):
            if isinstance(pushed[k].type, StackType):
                # the stack pushed here is the one popped at k: its cotangent stack, and the
                # positions that cotangent stack holds
                twin = self.shared.popped[stack][k]
                self.shared.ct_stacks[pushed[k]] = v
                self.shared.ct_layout[pushed[k]] = self.shared.ct_layout[twin]
                if twin in self.shared.popped:  # (a stack of stacks: deeper nesting)
                    self.shared.popped[pushed[k]] = self.shared.popped[twin]
                self.shared.ct_direct.add(v)
            else:
                out[k] = v
        return out


def _symbolic(ct: Value | None) -> Cotangent:
    return ZERO if ct is None else ct


def _concrete(ct: Cotangent) -> Value | None:
    return None if isinstance(ct, Zero) else ct


def _values(cts: Iterable[Cotangent]) -> list[Value]:
    return [c for c in cts if not isinstance(c, Zero)]


def blocked_values(program: Program, no_grad: Iterable[Value], ops: Iterable[Operation] | None = None) -> set[Value]:
    """The no-grad set and every stop_gradient value of `program` (made by `ops`, default all)."""
    blocked = set(no_grad)
    blocked.update(v for v in program.inputs if v.stop_gradient)
    for op in program.walk() if ops is None else ops:
        blocked.update(r for r in op.results if r.stop_gradient)
        for b in op.blocks:
            blocked.update(a for a in b.args if a.stop_gradient)
    return blocked


def _check_cotangents(outputs: Sequence[Value], grad_outputs: Sequence[Value | None]) -> None:
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"grad_outputs has {len(grad_outputs)} entries for {len(outputs)} outputs")
    for k, (y, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            continue
        yt, gt = y.type, g.type
        if not isinstance(gt, type(yt)) or getattr(gt, "shape", None) != getattr(yt, "shape", None):
            raise ValueError(
                f"grad_outputs[{k}] has shape {list(getattr(gt, 'shape', ()))} but output {k} has shape "
                f"{list(getattr(yt, 'shape', ()))}"
            )
        if getattr(gt, "dtype", None) != getattr(yt, "dtype", None):
            warnings.warn(f"grad_outputs[{k}] has dtype {gt} but output {k} is {yt}", stacklevel=3)


def grad(
    program: Program,
    outputs: Sequence[Value],
    inputs: Sequence[Value],
    grad_outputs: Sequence[Value | None] | None = None,
    no_grad: Iterable[Value] | None = None,
) -> Gradients:
    """Append to `program` the ops computing d(sum <grad_outputs, outputs>)/d(inputs).

    `grad_outputs`: one cotangent per output (None: ones); no_grad: values through which no
    gradient flows. Returns the program and one gradient value per input (None where the input
    is unreachable from the outputs, in the no-grad set, or stops gradient). Raises ValueError for
    a cotangent whose shape differs from its output's; warns when only the dtype differs.
    """
    cot = list(grad_outputs) if grad_outputs is not None else [None] * len(outputs)
    _check_cotangents(outputs, cot)
    # The transform allocates many small, long-lived objects (ops, values, use lists), which make
    # the cyclic collector rescan the growing program again and again, so that the cost per op
    # grows with the program (bench/backward_scaling.py). Nothing it makes is garbage meanwhile.
    with paused():
        return _grad(program, outputs, inputs, list(cot), no_grad)


def _grad(
    program: Program,
    outputs: Sequence[Value],
    inputs: Sequence[Value],
    cot: list[Value | None],
    no_grad: Iterable[Value] | None,
) -> Gradients:
    before = set(program.walk())
    blocked = blocked_values(program, no_grad or ())
    reach = prune.reachable(program.block, inputs, blocked)
    root = _Ctx(_Shared(reach, blocked), program.block, program.block, None)
    seeds = []
    for y, g in zip(outputs, cot):
        if y not in reach or not is_differentiable(y.type):
            continue
        if g is None:
            root.b.origin = y.op
            g = root.b.one("full_like", y, value=1.0)
        seeds.append((y, g))
    wanted = list(dict.fromkeys(inputs))
    got = dict(zip(wanted, root.backprop([(y, [g]) for y, g in seeds], wanted)))
    grads = [None if v in blocked else _concrete(got[v]) for v in inputs]
    _sweep(set(program.walk()) - before, {g for g in grads if g is not None} | set(program.outputs))
    return Gradients(
        program, grads, set(program.walk()) - before, list(outputs), list(inputs), set(no_grad or ()), reach
    )


def _sweep(added: set[Operation], kept: set[Value]) -> None:
    """Take out the added ops nothing uses (and so the ops only they used): a cotangent summed
    where it is read and then met only blocked values (a split's element in the no-grad set: pruning
    follows a vector whole) is not left behind. Ops with blocks or side effects stay."""
    dead = [op for op in added if _unused(op, kept)]
    while dead:
        op = dead.pop()
        if op.parent is None:
            continue  # (taken out already)
        op.parent.remove(op)
        dead += [v.op for v in op.operands if v.op in added and _unused(v.op, kept)]


def _unused(op: Operation, kept: set[Value]) -> bool:
    return (
        op.parent is not None
        and not op.blocks
        and not OPS[op.name].execution.writes
        and OPS[op.name].drawing.family != "stack"  # (a pop takes from its stack: its pushes expect it)
        and bool(op.results)
        and all(not r.uses and r not in kept for r in op.results)
    )


def append_backward(
    program: Program,
    loss: Value,
    parameters: Sequence[Value] | None = None,
    no_grad: Iterable[Value] | None = None,
) -> list[tuple[Value, Value | None]]:
    """(parameter, gradient) pairs of a scalar `loss`; parameters default to every program input
    that needs a gradient (float, not stop_gradient, not in no_grad)."""
    if loss.type != TensorType((), getattr(loss.type, "dtype", "f64")) and getattr(loss.type, "size", 0) != 1:
        raise ValueError(f"append_backward needs a one-element loss, got {loss.type}")
    skip = set(no_grad or ())
    params = (
        list(parameters)
        if parameters is not None
        else [v for v in program.inputs if is_differentiable(v.type) and not v.stop_gradient and v not in skip]
    )
    g = grad(program, [loss], params, None, skip)
    return list(zip(params, g.grads))
