"""Lowering a gradcert program into a third-party framework, one op at a time.

A backend supplies a table: op name -> `lower(low, op, args)`, which builds the framework's
value(s) for one op from its operands' (already lowered) values. A vector value (`combine`'s
result) is lowered as a Python list of the framework's tensors; `flatten`/`unflatten` turn a
sequence of values whose types may be vectors into plain tensors and back, for control-flow
APIs that take flat lists. Ops the table lacks are `Unsupported`, never skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..reference.ir import Block, Operation, Value
from ..reference.ops import OPS
from ..reference.types import Type, VectorType
from .api import Unsupported

Lower = Callable[["Lowering", Operation, list[Any]], Any]


class Lowering:
    """Walks blocks in order, keeping value -> framework value in `env`."""

    def __init__(self, backend: str, table: Mapping[str, Lower], ns: Any = None) -> None:
        self.backend, self.table, self.ns = backend, table, ns
        self.env: dict[Value, Any] = {}

    def run_block(self, block: Block, args: Sequence[Any] = ()) -> list[Any]:
        """Lower `block` with its arguments bound to `args`; returns what its `yield` yields."""
        for a, x in zip(block.args, args):
            self.env[a] = x
        for op in block.ops:
            if op.name == "yield":
                return [self.env[v] for v in op.operands]
            self.op(op)
        return []

    def op(self, op: Operation) -> None:
        fn = self.table.get(op.name)
        if fn is None:
            raise Unsupported(f"the {self.backend} backend has no lowering for '{op.name}'")
        out = fn(self, op, [self.env[v] for v in op.operands])
        results = list(out) if OPS[op.name].multi else [out]
        if len(results) != len(op.results):
            raise AssertionError(f"lowering of '{op.name}' gave {len(results)} results for {len(op.results)}")
        for v, x in zip(op.results, results):
            self.env[v] = self.result(v, x)

    def result(self, v: Value, x: Any) -> Any:
        """Hook: a backend marks stop_gradient results here."""
        return x


def flatten(values: Iterable[Any], types: Iterable[Type]) -> list[Any]:
    out: list[Any] = []
    for x, t in zip(values, types):
        if isinstance(t, VectorType):
            out.extend(x)
        else:
            out.append(x)
    return out


def unflatten(flat: Sequence[Any], types: Iterable[Type]) -> list[Any]:
    out: list[Any] = []
    i = 0
    for t in types:
        if isinstance(t, VectorType):
            out.append(list(flat[i : i + len(t.elems)]))
            i += len(t.elems)
        else:
            out.append(flat[i])
            i += 1
    return out


def types_of(values: Iterable[Value]) -> list[Type]:
    return [v.type for v in values]


DTYPE_NAMES = {"f64": "float64", "f32": "float32", "i64": "int64", "bool": "bool"}
