"""Pruning: which values depend on the inputs, and which the outputs depend on.

Reachability flows forward through differentiable operand positions, through region ops by their
`flow` rule, and through stacks (a push makes its stack depend on what it pushes). Values that
stop gradient or are in the no-grad set never become reachable.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

from gradcert.reference.ir import Block, Operation, Value
from gradcert.reference.ir.types import StackType, is_differentiable
from gradcert.reference.ops import OPS


class _Reach:
    def __init__(self, seeds: Iterable[Value], blocked: set[Value], only: Container[Operation] | None) -> None:
        self.blocked = blocked
        self.only = only
        self.set: set[Value] = set()
        self.parts: dict[Value, set[int]] = {}  # a packed vector: which of its elements are reached
        for v in seeds:
            self.mark(v)

    def mark(self, v: Value) -> None:
        # integer and bool values carry no gradient; stacks carry saved values that do
        if v not in self.blocked and (is_differentiable(v.type) or isinstance(v.type, StackType)):
            self.set.add(v)

    def block(self, blk: Block, arg_mask: Sequence[bool]) -> list[bool]:
        for a, m in zip(blk.args, arg_mask):
            if m:
                self.mark(a)
        for op in blk.ops:
            if self.only is None or op in self.only:
                self.op(op)
        term = blk.terminator
        return [v in self.set for v in term.operands] if term is not None else []

    def op(self, op: Operation) -> None:
        d = OPS[op.name]
        if d.autodiff.flow is not None:
            out = d.autodiff.flow(op, [v in self.set for v in op.operands], self.block)
            for r, m in zip(op.results, out):
                if m:
                    self.mark(r)
            return
        if d.autodiff.structural == "pack":
            hit = {i for i, v in enumerate(op.operands) if v in self.set}
            if hit:
                self.mark(op.results[0])
                self.parts[op.results[0]] = hit
            return
        if d.autodiff.structural == "unpack" and op.operands[0] in self.parts:
            for i in self.parts[op.operands[0]]:
                self.mark(op.results[i])
            return
        if any(v in self.set for i, v in enumerate(op.operands) if d.is_differentiable_operand(i)):
            for i in d.execution.writes:
                self.mark(op.operands[i])
            for r in op.results:
                self.mark(r)


def reachable(
    block: Block, seeds: Iterable[Value], blocked: set[Value], only: Container[Operation] | None = None
) -> set[Value]:
    """Every value in `block` (nested blocks included) that depends differentiably on `seeds`;
    `only`: the ops to follow (a forward program's, within a transformed one), default all."""
    r = _Reach(seeds, blocked, only)
    r.block(block, [])
    return r.set


def coreachable(block: Block, outputs: Iterable[Value], only: Container[Operation] | None = None) -> set[Value]:
    """Values the outputs may depend on (region ops conservatively: all their inputs); `only`:
    the ops to follow, default all."""
    need = set(outputs)
    for op in reversed(block.ops):
        if only is not None and op not in only:
            continue
        if not op.blocks:  # (most ops)
            if OPS[op.name].execution.writes or any(r in need for r in op.results):
                need.update(op.operands)
            continue
        nested = [o for o in op.walk() if only is None or o in only]
        if any(r in need for r in op.results) or any(OPS[o.name].execution.writes for o in nested):
            need.update(op.operands)
            for inner in nested[1:]:  # a region op's blocks: all they read and make
                need.update(inner.operands)
                need.update(inner.results)
    return need
