"""What a VJP rule is given and may use, in the spirit of JAX's transpose rules.

A rule is `vjp(ctx, op, cts, needed) -> one cotangent per input` (the op's operands, then, for a
region op, the values its blocks capture). It reads forward values through `ctx.primal`, emits
the backward's ops through the context's op emitters (`ctx.multiply(a, b)`, ...), and answers
`ZERO` for an input whose cotangent is zero or not `needed`: a symbolic zero is never built as a
tensor unless a consumer needs one (`ctx.zeros`).

`cts` holds one cotangent per result: a `Value`, or `ZERO`; a vector result's cotangent may come
as its `Parts` (one per element) -- `split`'s rule makes them and `combine`'s takes them. A region
op (`if`, `while`) gets each result's contributions unsummed (`Contributions`) and sums only what
it uses (`ctx.total`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias, final

from gradcert.reference.ir import Value

if TYPE_CHECKING:
    from gradcert.reference.ir import Block, Operation
    from gradcert.reference.ir.types import Type, VectorType


@final
class Zero:
    """The symbolic zero cotangent (`ZERO`, the only one)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ZERO"


ZERO: Final = Zero()


class Parts(list["Value | Zero"]):
    """A vector's cotangent not built into one value: one cotangent per element."""

    def __init__(self, items: Iterable[Value | Zero], type: VectorType) -> None:
        super().__init__(items)
        self.type = type


Cotangent: TypeAlias = "Value | Zero"
# what a result's cotangent arrives as: one value (or its parts), or, for a region op, the list
# of its contributions
Incoming: TypeAlias = "Value | Parts | Zero | Contributions"
Contributions: TypeAlias = "Sequence[Value | Parts] | None"


def value(ct: Incoming) -> Value:
    """A result's cotangent as one value: what a rule's op is given where it has one result (an
    op runs only where a result has a cotangent), or, of several, one the rule has checked."""
    if not isinstance(ct, Value):
        raise TypeError(f"expected one cotangent value, got {ct!r}")
    return ct


def packed(ct: Incoming) -> Value | Parts:
    """A vector result's cotangent, as one value or as its parts (what `combine`'s rule takes)."""
    if not isinstance(ct, (Value, Parts)):
        raise TypeError(f"expected a vector's cotangent, got {ct!r}")
    return ct


def cotangents(cts: Sequence[Incoming]) -> list[Cotangent]:
    """A plain op's result cotangents, each a value or `ZERO`."""
    out: list[Cotangent] = []
    for ct in cts:
        if not isinstance(ct, (Value, Zero)):
            raise TypeError(f"expected a cotangent value or ZERO, got {ct!r}")
        out.append(ct)
    return out


def contributions(ct: Incoming) -> Contributions:
    """A region op's result cotangent: the list of its contributions (None: none)."""
    if isinstance(ct, (Value, Zero, Parts)):
        raise TypeError(f"expected a region result's contributions, got {ct!r}")
    return ct


def built(ctx: VjpContext, ct: Cotangent, t: Type) -> Value:
    """`ct` as a value, a zero of type `t` built for the symbolic zero (a block must yield one)."""
    return ctx.zeros(t) if isinstance(ct, Zero) else ct


class VjpContext(Protocol):
    """Everything a VJP rule may call. The context's own services come first; the op emitters
    (one per op a rule emits, typed by the op's operands and attributes) after them."""

    # --- reading the forward program ------------------------------------------------------------
    def primal(self, v: Value) -> Value:
        """`v` as the backward block being built can read it (saved, copied or popped)."""
        ...

    def reachable(self, v: Value) -> bool:
        """Whether `v` depends on a differentiated input (pruning)."""
        ...

    def depends(self, block: Block, seeds: Iterable[Value]) -> set[Value]:
        """The values of `block` (nested blocks included) that depend on `seeds`."""
        ...

    def effect_sinks(self, block: Block) -> list[Value]:
        """The values pushed in `block` on stacks that have cotangent stacks (second order)."""
        ...

    # --- cotangents -------------------------------------------------------------------------------
    def unbroadcast(self, ct: Value, operand: Value) -> Value:
        """`ct` summed over the axes that broadcasting added to `operand`'s shape."""
        ...

    def zeros(self, t: Type) -> Value:
        """A zero of type `t`, built: where a consumer needs a value, not a symbolic zero."""
        ...

    def add(self, a: Value, b: Value) -> Value:
        """`a + b`, elementwise for vectors too."""
        ...

    def total(self, contributions: Contributions) -> Cotangent:
        """A region result's contributions summed into one value."""
        ...

    def parts(self, cts: Sequence[Cotangent], type: Type) -> Parts:
        """The cotangents of a vector's elements, kept as parts."""
        ...

    def split_vector(self, ct: Value | Parts | Zero) -> list[Cotangent]:
        """A vector's cotangent as one cotangent per element."""
        ...

    # --- regions (the rules of `if` and `while`) --------------------------------------------------
    def region(self, fwd: Block) -> RegionContext:
        """A context that differentiates the forward block `fwd` into a new backward block."""
        ...

    def emit_region(self, name: str, operands: Sequence[Value], blocks: Sequence[Block]) -> list[Value]:
        """A region op of `blocks` on `operands`: its results."""
        ...

    def new_block(self, label: str, types: Sequence[Type], fill: Callable[..., Sequence[Value]]) -> Block:
        """A block of arguments `types` whose ops `fill(builder, *args)` emits."""
        ...

    # --- stacks under second order ---------------------------------------------------------------
    def push_cotangents(self, pop: Operation, cts: Sequence[Cotangent]) -> None:
        """The dual of a pop: its results' cotangents pushed on the cotangent stack."""
        ...

    def pop_cotangents(self, push: Operation) -> list[Cotangent]:
        """The dual of a push: the pushed values' cotangents popped back."""
        ...

    # --- op emitters -----------------------------------------------------------------------------
    def emit(self, name: str, *operands: Value, **attrs: Any) -> Value:
        """An op of one result (`compare` ops are named at run time: `ctx.emit(compare, a, b)`)."""
        ...

    def abs(self, x: Value) -> Value:
        return self.emit("abs", x)

    def cos(self, x: Value) -> Value:
        return self.emit("cos", x)

    def erf(self, x: Value) -> Value:
        return self.emit("erf", x)

    def exp(self, x: Value) -> Value:
        return self.emit("exp", x)

    def log(self, x: Value) -> Value:
        return self.emit("log", x)

    def neg(self, x: Value) -> Value:
        return self.emit("neg", x)

    def sign(self, x: Value) -> Value:
        return self.emit("sign", x)

    def sin(self, x: Value) -> Value:
        return self.emit("sin", x)

    def square(self, x: Value) -> Value:
        return self.emit("square", x)

    def tanh(self, x: Value) -> Value:
        return self.emit("tanh", x)

    def scale(self, x: Value, *, scale: float = 1.0, bias: float = 0.0) -> Value:
        return self.emit("scale", x, scale=scale, bias=bias)

    def cast(self, x: Value, *, dtype: str) -> Value:
        return self.emit("cast", x, dtype=dtype)

    def multiply(self, a: Value, b: Value) -> Value:
        return self.emit("multiply", a, b)

    def divide(self, a: Value, b: Value) -> Value:
        return self.emit("divide", a, b)

    def subtract(self, a: Value, b: Value) -> Value:
        return self.emit("subtract", a, b)

    def matmul(self, a: Value, b: Value) -> Value:
        return self.emit("matmul", a, b)

    def where(self, cond: Value, a: Value, b: Value) -> Value:
        return self.emit("where", cond, a, b)

    def less_than(self, a: Value, b: Value) -> Value:
        return self.emit("less_than", a, b)

    def greater_than(self, a: Value, b: Value) -> Value:
        return self.emit("greater_than", a, b)

    def greater_equal(self, a: Value, b: Value) -> Value:
        return self.emit("greater_equal", a, b)

    def full(self, *, shape: Sequence[int], value: float, dtype: str = "f64") -> Value:
        return self.emit("full", shape=list(shape), value=value, dtype=dtype)

    def sum(self, x: Value, *, axes: Sequence[int] = (), keepdim: bool = False) -> Value:
        return self.emit("sum", x, axes=list(axes), keepdim=keepdim)

    def cumsum(self, x: Value, *, axis: int, reverse: bool = False) -> Value:
        return self.emit("cumsum", x, axis=axis, reverse=reverse)

    def reshape(self, x: Value, *, shape: Sequence[int]) -> Value:
        return self.emit("reshape", x, shape=list(shape))

    def expand(self, x: Value, *, shape: Sequence[int]) -> Value:
        return self.emit("expand", x, shape=list(shape))

    def transpose(self, x: Value, *, perm: Sequence[int]) -> Value:
        return self.emit("transpose", x, perm=list(perm))

    def pad(self, x: Value, *, low: Sequence[int], high: Sequence[int]) -> Value:
        return self.emit("pad", x, low=list(low), high=list(high))

    def slice(self, x: Value, *, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> Value:
        return self.emit("slice", x, axes=list(axes), starts=list(starts), ends=list(ends))

    def set_value_with_tensor(
        self, x: Value, values: Value, *, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int]
    ) -> Value:
        return self.emit("set_value_with_tensor", x, values, axes=list(axes), starts=list(starts), ends=list(ends))

    def gather(self, x: Value, index: Value, *, axis: int = 0) -> Value:
        return self.emit("gather", x, index, axis=axis)

    def index_select(self, x: Value, index: Value, *, axis: int = 0) -> Value:
        return self.emit("index_select", x, index, axis=axis)

    def index_add(self, x: Value, index: Value, values: Value, *, axis: int = 0) -> Value:
        return self.emit("index_add", x, index, values, axis=axis)

    def take_along_axis(self, x: Value, indices: Value, *, axis: int) -> Value:
        return self.emit("take_along_axis", x, indices, axis=axis)

    def put_along_axis(self, x: Value, indices: Value, values: Value, *, axis: int, reduce: str = "assign") -> Value:
        return self.emit("put_along_axis", x, indices, values, axis=axis, reduce=reduce)

    def scatter(self, x: Value, index: Value, updates: Value, *, overwrite: bool = True) -> Value:
        return self.emit("scatter", x, index, updates, overwrite=overwrite)

    def last_occurrence(self, index: Value, *, dtype: str) -> Value:
        return self.emit("last_occurrence", index, dtype=dtype)

    def combine(self, *xs: Value) -> Value:
        return self.emit("combine", *xs)

    def concat(self, xs: Value, *, axis: int = 0) -> Value:
        return self.emit("concat", xs, axis=axis)

    def stack(self, xs: Value, *, axis: int = 0) -> Value:
        return self.emit("stack", xs, axis=axis)

    def unbind(self, x: Value, *, axis: int = 0) -> Value:
        return self.emit("unbind", x, axis=axis)

    def split_with_sections(self, x: Value, *, sections: Sequence[int], axis: int = 0) -> Value:
        return self.emit("split_with_sections", x, sections=list(sections), axis=axis)


class RegionContext(VjpContext, Protocol):
    """The context of a block being differentiated inside a region op's rule."""

    block: Block  # the backward block being built

    def add_arg(self, t: Type) -> Value:
        """A new argument of the backward block."""
        ...

    def backprop(
        self, seeds: Iterable[tuple[Value, Sequence[Value | Parts] | None]], wanted: Sequence[Value]
    ) -> list[Cotangent]:
        """Seed cotangents of the forward block's values, differentiate it, and take `wanted`'s."""
        ...

    def has_effects(self) -> bool:
        """Whether the backward block holds an op with side effects (it must be emitted)."""
        ...

    def finish(self, yields: Sequence[Value], count_trips: bool = False) -> Value | None:
        """End the backward block with `yields`; the stack of what it saved (None: nothing)."""
        ...


# vjp(ctx, op, cts, needed) -> one cotangent per operand, then per captured value
Vjp: TypeAlias = Callable[[VjpContext, "Operation", Sequence[Incoming], Sequence[bool]], Sequence["Cotangent | Parts"]]
