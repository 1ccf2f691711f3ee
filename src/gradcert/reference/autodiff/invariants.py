"""Invariants of a transformed program: what a correct backward leaves behind.

- the verifier passes;
- the forward part is unchanged (every forward op still there, in order, with the same
  operands, results and attributes; the backward may only add ops);
- no zero-fill (`full`, `full_like`) made by the backward is left without a use;
- no dead backward op (an op without side effects whose results nobody uses);
- no backward op for a pruned forward op (its origin must lie on an input-to-output path).

Each violation names the op.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcert.reference.autodiff import prune
from gradcert.reference.autodiff.backward import Gradients, blocked_values
from gradcert.reference.ir import Block, Operation, Program, Value
from gradcert.reference.ir.printer import Namer, print_program
from gradcert.reference.ir.verifier import verify_all
from gradcert.reference.ops import OPS

ZERO_FILL = frozenset({"full", "full_like"})


@dataclass(frozen=True)
class Snapshot:
    """The forward program before a transform: each op's signature, and each block's op order."""

    ops: dict[Operation, tuple[object, ...]]
    order: dict[Block, list[Operation]]


def _sig(op: Operation) -> tuple[object, ...]:
    # (lists and a dict: compared element by element in C, values and blocks by identity)
    return op.name, op.operands[:], op.results[:], dict(op.attrs), op.parent, op.blocks[:]


def _unchanged(op: Operation, sig: tuple[object, ...]) -> bool:
    """`op` as `_sig` saw it (compared in place: no copies)."""
    name, operands, results, attrs, parent, blocks = sig
    return (
        op.name == name
        and op.operands == operands
        and op.results == results
        and op.attrs == attrs
        and op.parent is parent
        and op.blocks == blocks
    )


def snapshot(program: Program) -> Snapshot:
    ops: dict[Operation, tuple[object, ...]] = {}
    order = {program.block: program.block.ops[:]}
    for op in program.walk():
        ops[op] = _sig(op)
        for b in op.blocks:
            order[b] = b.ops[:]
    return Snapshot(ops, order)


class InvariantError(AssertionError):
    pass


def violations(g: Gradients, before: Snapshot) -> list[str]:
    program = g.program
    lines: dict[Operation, int] = {}

    def where(op: Operation) -> str:
        if not lines:  # printed only to name a violation: the common case has none
            print_program(program, lines)
        first = f" {Namer(program)(op.results[0])}" if op.results else ""
        return f"line {lines.get(op, '?')}: '{op.name}'{first}"

    out: list[str] = []
    removed: set[Operation] = set()
    # every forward op still in its block, in order: the common case, seen block by block
    if any([op for op in blk.ops if op in before.ops] != order for blk, order in before.order.items()):
        now = set(program.walk())
        removed = set(before.ops) - now
        out += [f"forward op {where(op)} was removed" for op in before.ops if op in removed]
        for blk, order in before.order.items():
            kept = [op for op in blk.ops if op in before.ops]
            if kept != [op for op in order if op in now]:
                out.append(f"forward ops of block ^{blk.label} were reordered")
    unchanged: set[Operation] = set()
    for op, sig in before.ops.items():
        if _unchanged(op, sig):
            unchanged.add(op)
        elif op not in removed:
            out.append(f"forward op {where(op)} was changed")
    # the forward ops' type rules held before the transform (the builder infers every result type,
    # the parser verifies): the unchanged ones need no second run; scopes and the in-place rule
    # are checked for every op, as the backward's ops may break them for forward ones
    out[:0] = [f"verifier: {e.line}:{e.col}: {e.message}" for e in verify_all(program, trusted=unchanged)]

    used_by_caller = {v for v in g.grads if v is not None} | set(program.outputs)
    unused = {
        op
        for op in g.added
        if op.results
        and not op.results[0].uses  # (the common case, and the quick test)
        and all(not r.uses and r not in used_by_caller for r in op.results)
    }
    if unused:  # (none, in the common case: the ops with side effects and the program order are not needed)
        alive = effectful(program)
        for op in (o for o in program.walk() if o in unused and o not in alive):  # in program order
            kind = "zero-fill" if op.name in ZERO_FILL else "dead backward op"
            out.append(f"{kind} {where(op)} has no use")

    # paths of the forward program: its ops, as the backward found them (checked unchanged above);
    # what depends on the inputs as the backward's pruning found it, where it says (the same
    # function of the same request: tests/reference/test_backward.py checks it equals a second reckoning)
    forward = before.ops
    reach = g.reach
    if reach is None:
        reach = prune.reachable(program.block, g.inputs, blocked_values(program, g.no_grad, forward), forward)
    coreach = prune.coreachable(program.block, g.outputs, forward)
    on_path: dict[Operation, bool] = {}  # per forward op: the backward makes several ops for one
    for op in g.added:
        src = op.origin
        if src is None or src not in forward:
            continue
        if src not in on_path:
            on_path[src] = any(v in reach for v in [*src.operands, *src.captures()]) and (
                any(r in coreach for r in src.results)
                # (a region whose forward ops write a tape: the pushes a backward's loop pops)
                or any(OPS[o.name].execution.writes for o in src.walk() if o in forward)
                or _nested_in_path(src, coreach)
            )
        if not on_path[src]:
            out.append(f"backward op {where(op)} differentiates {where(src)}, which no input-to-output path crosses")
    return out


def effectful(program: Program) -> set[Operation]:
    """Ops with side effects, their own or of an op nested in their blocks: never dead."""
    found: set[Operation] = set()

    def block(b: Block) -> bool:
        any_ = False
        for op in b.ops:
            inner = False
            for sub in op.blocks:
                inner = block(sub) or inner
            if inner or OPS[op.name].execution.effects:
                found.add(op)
                any_ = True
        return any_

    block(program.block)
    return found


def _nested_in_path(op: Operation, coreach: set[Value]) -> bool:
    # an op inside a block counts as on the path when its enclosing region op is
    parent = op.parent.parent if op.parent is not None else None
    while parent is not None:
        if any(r in coreach for r in parent.results):
            return True
        parent = parent.parent.parent if parent.parent is not None else None
    return False


def check(g: Gradients, before: Snapshot) -> None:
    """Raise InvariantError listing every violation."""
    found = violations(g, before)
    if found:
        raise InvariantError("backward program invariants broken:\n  " + "\n  ".join(found))
