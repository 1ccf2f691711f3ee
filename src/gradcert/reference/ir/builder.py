"""Building programs by hand or from a transform: `b.tanh(x)`, `b.if_(...)`, `b.while_(...)`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gradcert.reference.ir import Block, Operation, Program, Value
from gradcert.reference.ir.types import TensorType, Type
from gradcert.reference.ops import DECLARED, OpDef, TypeRuleError, lookup

_KINDS: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, float),
    "bool": lambda v: isinstance(v, bool),
    "ints": lambda v: isinstance(v, tuple) and all(isinstance(i, int) and not isinstance(i, bool) for i in v),
    "dtype": lambda v: isinstance(v, str),
    "word": lambda v: isinstance(v, str),  # one of the op's named modes
}


def normalize_attrs(d: OpDef, attrs: dict[str, Any] | None) -> dict[str, Any]:
    """Fill defaults, coerce ints to floats and lists to tuples, and check every attribute's kind."""
    if not attrs and not d.signature.attrs:
        return {}  # most ops take no attribute: skip the dict work
    out = {}
    for k, v in {**d.signature.defaults, **(attrs or {})}.items():
        if k not in d.signature.attrs:
            raise TypeRuleError(f"'{d.name}' has no attribute '{k}'")
        kind = d.signature.attrs[k]
        if kind == "float" and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if kind == "ints" and isinstance(v, list):
            v = tuple(v)
        if not _KINDS[kind](v):
            raise TypeRuleError(f"attribute {k}={v!r} of '{d.name}' must be of kind {kind}")
        out[k] = v
    missing = [k for k in d.signature.attrs if k not in out]
    if missing:
        raise TypeRuleError(f"'{d.name}' needs attribute(s) {', '.join(missing)}")
    return out


def check_arity(d: OpDef, n: int, blocks: int) -> None:
    if d.signature.nargs is not None and n != d.signature.nargs:
        raise TypeRuleError(f"'{d.name}' takes {d.signature.nargs} operand(s), got {n}")
    if blocks != len(d.signature.regions):
        raise TypeRuleError(f"'{d.name}' has {len(d.signature.regions)} block(s), got {blocks}")


class Builder:
    """Appends (or inserts, at `index`) ops to a block; `b.<op>(...)` emits one op by name.

    An op with one result returns its value, an op with several (or none) returns a list.
    Ops made here get `origin` as the forward op they come from (None for hand-written ones).
    """

    def __init__(self, block: Block, index: int | None = None, origin: Operation | None = None) -> None:
        self.block = block
        self.index = index  # None: always append, whatever else is inserted meanwhile
        self.origin = origin

    def op(
        self,
        name: str,
        operands: Sequence[Value],
        attrs: dict[str, Any] | None = None,
        blocks: Sequence[Block] = (),
        result_types: Sequence[Type] | None = None,
    ) -> Operation:
        d = lookup(name)
        check_arity(d, len(operands), len(blocks))
        a = normalize_attrs(d, attrs)
        types = d.infer([v.type for v in operands], a, blocks)
        if types == [DECLARED]:
            if result_types is None:
                raise TypeRuleError(f"'{name}' needs its result type declared")
            types = list(result_types)
        op = Operation(name, operands, [Value(t) for t in types], a, blocks)
        op.origin = self.origin
        if self.index is None:
            self.block.append(op)
        else:
            self.block.insert(self.index, op)
            self.index += 1
        return op

    def one(self, name: str, *operands: Value, **attrs: Any) -> Value:
        """Emit an op with exactly one result and return it."""
        (r,) = self.op(name, operands, attrs).results
        return r

    def emit(self, name: str, *operands: Value, **attrs: Any) -> Any:
        op = self.op(name, operands, attrs)
        return op.results if lookup(name).execution.multi or len(op.results) != 1 else op.results[0]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)
        lookup(name)
        return lambda *operands, **attrs: self.emit(name, *operands, **attrs)

    def block_of(self, label: str, arg_types: Sequence[Type], fill: Callable[..., Sequence[Value]]) -> Block:
        """A new block whose ops `fill(builder, *args)` emits; it ends with a yield of what fill returns."""
        blk = Block(label, [Value(t) for t in arg_types])
        inner = Builder(blk, origin=self.origin)
        inner.op("yield", list(fill(inner, *blk.args)))
        return blk

    def if_(
        self, cond: Value, then: Callable[..., Sequence[Value]], other: Callable[..., Sequence[Value]]
    ) -> list[Value]:
        blocks = [self.block_of("then", [], then), self.block_of("else", [], other)]
        return self.op("if", [cond], blocks=blocks).results

    def while_(
        self,
        inits: Sequence[Value],
        cond: Callable[..., Value],
        body: Callable[..., Sequence[Value]],
    ) -> list[Value]:
        types = [v.type for v in inits]
        blocks = [self.block_of("cond", types, lambda b, *a: [cond(b, *a)]), self.block_of("body", types, body)]
        return self.op("while", list(inits), blocks=blocks).results

    def const(self, value: float, shape: Sequence[int] = (), dtype: str = "f64") -> Value:
        return self.op("full", [], {"shape": tuple(shape), "value": float(value), "dtype": dtype}).results[0]


class ProgramBuilder(Builder):
    """`pb.input(name, type)`, then ops, then `pb.build(*outputs)`."""

    def __init__(self) -> None:
        self.program = Program()
        super().__init__(self.program.block)

    def input(self, name: str, type: Type | None = None, stop_gradient: bool = False) -> Value:
        v = Value(type or TensorType(()), name, stop_gradient)
        v.owner = self.program.block
        self.program.block.args.append(v)
        return v

    def build(self, *outputs: Value) -> Program:
        self.program.outputs = list(outputs)
        return self.program
