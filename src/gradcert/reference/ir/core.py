"""The SSA IR: values, operations, blocks and programs.

Values are hashed by identity; each value knows the operation (or block, for block arguments)
that defines it and the operations that use it. Sub-programs (the branches of `if`, the condition
and body of `while`) are blocks held by their operation; a block's operations may read values of
enclosing blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from gradcert.reference.ir.types import TensorType, Type, VectorType

Attrs = dict[str, Any]


class Value:
    __slots__ = ("type", "name", "stop_gradient", "owner", "uses")

    def __init__(self, type: Type, name: str | None = None, stop_gradient: bool = False) -> None:
        self.type = type
        self.name = name
        self.stop_gradient = stop_gradient
        # The defining Operation, or the Block whose argument this is; None while detached.
        self.owner: Operation | Block | None = None
        self.uses: list[Operation] = []

    @property
    def op(self) -> Operation | None:
        return self.owner if isinstance(self.owner, Operation) else None

    @property
    def tensor(self) -> TensorType:
        """This value's type where it is a tensor's (a tensor op's rule reads shapes through it)."""
        if not isinstance(self.type, TensorType):
            raise TypeError(f"{self!r} is not a tensor")
        return self.type

    @property
    def vector(self) -> VectorType:
        """This value's type where it is a vector's."""
        if not isinstance(self.type, VectorType):
            raise TypeError(f"{self!r} is not a vector")
        return self.type

    @property
    def block(self) -> Block | None:
        """The block in which this value is defined."""
        if isinstance(self.owner, Block):
            return self.owner
        return self.owner.parent if self.owner is not None else None

    def __repr__(self) -> str:
        return f"Value(%{self.name or '?'}: {self.type})"


class Operation:
    __slots__ = ("name", "operands", "results", "attrs", "blocks", "parent", "origin", "line", "col")

    def __init__(
        self,
        name: str,
        operands: Sequence[Value],
        results: Sequence[Value],
        attrs: Attrs | None = None,
        blocks: Sequence[Block] = (),
    ) -> None:
        self.name = name
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = list(results)
        self.attrs: Attrs = dict(attrs or {})
        self.blocks: list[Block] = list(blocks)
        self.parent: Block | None = None
        # For ops made by the backward: the forward op they differentiate (or save values of).
        self.origin: Operation | None = None
        self.line: int | None = None  # source position, when parsed
        self.col: int | None = None
        for v in self.operands:
            v.uses.append(self)
        for r in self.results:
            r.owner = self
        for b in self.blocks:
            b.parent = self

    def add_operand(self, v: Value) -> None:
        self.operands.append(v)
        v.uses.append(self)

    def add_result(self, v: Value) -> None:
        self.results.append(v)
        v.owner = self

    def walk(self) -> Iterator[Operation]:
        """This op and every op nested in its blocks, in program order."""
        yield self
        for b in self.blocks:
            yield from b.walk()

    def captures(self) -> list[Value]:
        """Values read inside this op's blocks but defined outside it, in first-use order."""
        return captures(self.blocks)

    def __repr__(self) -> str:
        return f"Operation({self.name}, line={self.line})"


def captures(blocks: Iterable[Block]) -> list[Value]:
    """Values read inside `blocks` (of one op: some or all of them) but defined outside, in
    first-use order."""
    inside: set[Value] = set()
    seen: dict[Value, None] = {}
    for b in blocks:
        _collect_captures(b, inside, seen)
    return list(seen)


def _collect_captures(block: Block, inside: set[Value], seen: dict[Value, None]) -> None:
    inside.update(block.args)
    for op in block.ops:
        for v in op.operands:
            if v not in inside:
                seen.setdefault(v, None)
        for b in op.blocks:
            _collect_captures(b, inside, seen)
        inside.update(op.results)


class Block:
    __slots__ = ("label", "args", "ops", "parent")

    def __init__(self, label: str = "", args: Sequence[Value] = ()) -> None:
        self.label = label
        self.args: list[Value] = list(args)
        self.ops: list[Operation] = []
        self.parent: Operation | None = None
        for a in self.args:
            a.owner = self

    def insert(self, index: int, op: Operation) -> Operation:
        self.ops.insert(index, op)
        op.parent = self
        return op

    def append(self, op: Operation) -> Operation:
        return self.insert(len(self.ops), op)

    def remove(self, op: Operation) -> None:
        """Take out `op`, whose results nothing uses: its operands no longer count it as a use."""
        self.ops.remove(op)
        for v in op.operands:
            v.uses.remove(op)
        op.parent = None

    def walk(self) -> Iterator[Operation]:
        for op in self.ops:  # (not `op.walk()` for each: a generator per op, most without blocks)
            yield op
            for b in op.blocks:
                yield from b.walk()

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops and self.ops[-1].name == "yield" else None

    def encloses(self, other: Block | None) -> bool:
        """Whether `other` is this block or nested (at any depth) inside it."""
        while other is not None:
            if other is self:
                return True
            other = other.parent.parent if other.parent is not None else None
        return False


class Program:
    """A top block whose arguments are the program's inputs, and a list of outputs."""

    __slots__ = ("block", "outputs", "__weakref__")

    def __init__(self, inputs: Sequence[Value] = (), outputs: Sequence[Value] = ()) -> None:
        self.block = Block("main", inputs)
        self.outputs: list[Value] = list(outputs)

    @property
    def inputs(self) -> list[Value]:
        return self.block.args

    def walk(self) -> Iterator[Operation]:
        return self.block.walk()

    def input(self, name: str) -> Value:
        for v in self.inputs:
            if v.name == name:
                return v
        raise KeyError(f"program has no input %{name}")

    def __str__(self) -> str:
        from gradcert.reference.ir.printer import print_program

        return print_program(self)


def clone(
    program: Program,
    retype: Callable[[Type], Type] | None = None,
    reattr: Callable[[Attrs], Attrs] | None = None,
) -> tuple[Program, dict[Value, Value]]:
    """A deep copy, and the map from this program's values to the copy's. Names, flags, source
    positions and backward origins (where the origin is in the program) are kept; types are
    immutable and shared, or mapped by `retype` (and each op's attributes by `reattr`: the
    float64 twin of a float32 program, `precision.widen`)."""
    values: dict[Value, Value] = {}
    ops: dict[Operation, Operation] = {}

    def value(v: Value) -> Value:
        values[v] = c = Value(v.type if retype is None else retype(v.type), v.name, v.stop_gradient)
        return c

    def block(b: Block) -> Block:
        nb = Block(b.label, [value(a) for a in b.args])
        for op in b.ops:
            nb.append(operation(op))
        return nb

    def operation(op: Operation) -> Operation:
        operands = [values[v] for v in op.operands]
        blocks = [block(b) for b in op.blocks]  # nested blocks cannot read the op's own results
        attrs = op.attrs if reattr is None else reattr(op.attrs)
        new = Operation(op.name, operands, [value(r) for r in op.results], attrs, blocks)
        new.line, new.col = op.line, op.col
        new.origin = ops.get(op.origin) if op.origin is not None else None
        ops[op] = new
        return new

    copy = Program([value(v) for v in program.inputs])
    for op in program.block.ops:
        copy.block.append(operation(op))
    copy.outputs = [values[v] for v in program.outputs]
    return copy, values
