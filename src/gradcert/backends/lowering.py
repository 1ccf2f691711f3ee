"""Lowering a gradcert program into a third-party framework, one op at a time.

A backend supplies a table: op name -> `lower(low, op, args)`, which builds the framework's
value(s) for one op from its operands' (already lowered) values. A vector value (`combine`'s
result) is lowered as a Python list of the framework's tensors; `flatten`/`unflatten` turn a
sequence of values whose types may be vectors into plain tensors and back, for control-flow
APIs that take flat lists. Ops the table lacks are `Unsupported`, never skipped.

A framework with an Array-API namespace (JAX's `jax.numpy`, PyTorch through `array_api_compat`)
needs a table entry only where its lowering differs from the op's own kernel: `kernels(xp)` is the
fallback that calls each op's definition (`OpDef.kernel`, written against `xp`) on the framework's
arrays, so the framework's own ops, and its own backward, do the work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcert.backends.protocol import AdapterLimit, BackendResult, Unsupported
from gradcert.backends.registry import framework_version
from gradcert.reference.autodiff.prune import coreachable
from gradcert.reference.ir import Block, Operation, Value
from gradcert.reference.ir.types import Type, VectorType
from gradcert.reference.ops import OPS

if TYPE_CHECKING:
    from gradcert.generators.case import Case

Lower = Callable[["Lowering", Operation, list[Any]], Any]


class Lowering:
    """Walks blocks in order, keeping value -> framework value in `env`."""

    def __init__(
        self,
        backend: str,
        table: Mapping[str, Lower],
        ns: Any = None,
        fallback: Lower | None = None,
        blocked: Iterable[Value] = (),
    ) -> None:
        """`fallback` lowers ops the table lacks (see `kernels`); `blocked`: values, besides those
        marked stop_gradient, that the framework must stop gradients at (the no-grad set)."""
        self.backend, self.table, self.ns, self.fallback = backend, table, ns, fallback
        self.blocked = frozenset(blocked)
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
        if (
            fn is None
            and self.fallback is not None
            and OPS[op.name].kernel is not None
            and not OPS[op.name].execution.effects
        ):
            fn = self.fallback
        if fn is None:
            raise Unsupported(f"the {self.backend} backend has no lowering for '{op.name}'")
        out = fn(self, op, [self.env[v] for v in op.operands])
        results = list(out) if OPS[op.name].execution.multi else [out]
        if len(results) != len(op.results):
            raise AssertionError(f"lowering of '{op.name}' gave {len(results)} results for {len(op.results)}")
        for v, x in zip(op.results, results):
            self.env[v] = self.result(v, x)

    def result(self, v: Value, x: Any) -> Any:
        """The framework value bound to `v`: stopped where `v` stops gradient or is blocked."""
        if v.stop_gradient or v in self.blocked:
            return [self.stop(t) for t in x] if isinstance(x, (list, tuple)) else self.stop(x)
        return x

    def stop(self, x: Any) -> Any:
        """Hook: the framework's stop_gradient of one tensor."""
        return x

    def copy(self, x: Any) -> Any:
        """Hook: how a value crosses a block boundary (by copy, for a framework with in-place ops)."""
        return x

    def nested(self, block: Block, args: Sequence[Any] = ()) -> list[Any]:
        """`run_block` for a branch or loop body: arguments and yields cross by `copy`."""
        return [self.copy(y) for y in self.run_block(block, [self.copy(x) for x in args])]

    def run_ops(self, block: Block, args: Sequence[Any], ops: Sequence[Operation], outputs: Sequence[int]) -> list[Any]:
        """Of `block` bound to `args`, only `ops` (a slice: `trip_slice`); its yields at `outputs`."""
        for a, x in zip(block.args, args):
            self.env[a] = x
        for op in ops:
            self.op(op)
        assert block.terminator is not None
        return [self.env[block.terminator.operands[k]] for k in outputs]


def trip_slice(cond: Block, body: Block) -> tuple[list[int], list[Operation]]:
    """What a `while`'s trip count depends on: the carries the condition reads, directly or through
    the body's updates of them, and the body's ops that compute those updates, in order. A
    framework that must know the trip count before it builds the loop runs only these (a loop
    counter's few scalar ops) to count the trips, not the whole body once per trip, which, loop
    in loop, costs trips^depth."""
    assert cond.terminator is not None and body.terminator is not None
    read = coreachable(cond, cond.terminator.operands)
    carries = {k for k, a in enumerate(cond.args) if a in read}
    while True:
        need = coreachable(body, [body.terminator.operands[k] for k in carries])
        more = carries | {k for k, a in enumerate(body.args) if a in need}
        if more == carries:
            break
        carries = more
    ops = [
        op
        for op in body.ops[:-1]
        if any(r in need for r in op.results) or any(OPS[o.name].execution.writes for o in op.walk())
    ]
    return sorted(carries), ops


def refuse_second_order_no_grad(case: Any, framework: str) -> None:
    """Raise `Unsupported` for a second-order request with a no-grad set, in a framework that maps
    the set by stopping gradients where its values are defined (`Lowering.stop`). The set belongs
    to the first backward only (Paddle's `grad(..., no_grad_vars=...)`, the reference): the first
    derivative still reads those values, which still depend on the inputs, and the second
    derivative follows them there. A stop at the definition is a stop at every order, so the
    second derivative would lose those paths; the framework has no per-call no-grad set to map it
    to. (What would: differentiate the first order with the blocked values as extra arguments,
    then add their own vector-Jacobian products to the second derivative.)"""
    if case.order == 2 and case.no_grad:
        raise AdapterLimit(
            f"a no-grad set at second order: {framework} has no per-call no-grad set, and stopping the "
            "gradient where its values are defined would stop the second derivative there too"
        )


def kernels(xp: Any) -> Lower:
    """The fallback lowering: the op's own kernel, called on the framework's Array-API namespace.
    A kernel that may return a view of its operand (`OpDef.view`: assign, reshape, expand, ...)
    gives a copy (`Lowering.copy`), as the interpreter does: in the IR every op's result is a
    value of its own, and an in-place op on it must not write its operand (or, on PyTorch, an
    expanded view whose elements share memory)."""

    def lower(low: Lowering, op: Operation, a: list[Any]) -> Any:
        d = OPS[op.name]
        assert d.kernel is not None
        out = d.kernel(xp, *a, **op.attrs)
        return low.copy(out) if d.execution.view else out

    return lower


def last_wins(index: Any) -> list[int]:
    """The positions of an index vector's last occurrences: `scatter` with `overwrite` keeps the
    last update at a row (Paddle's semantics). A framework that leaves the winner of duplicate
    writes unspecified and runs eagerly (PyTorch's `index_put`) is given only those, the index
    values known when the case is lowered."""
    rows = [int(r) for r in np.asarray(index).tolist()]
    return [k for k, r in enumerate(rows) if r not in rows[k + 1 :]]


# Vectors are Python lists of the framework's tensors: `combine` makes one, `split` takes it apart.
VECTORS: dict[str, Lower] = {
    "combine": lambda low, op, a: list(a),
    # a split's elements are values of their own (`kernels` says why): an in-place op on one must
    # not write the tensor combined (`Lowering.copy`: a clone on PyTorch, nothing where values are
    # immutable)
    "split": lambda low, op, a: [low.copy(x) for x in a[0]],
}


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


class ArrayApiBackend:
    """What the backends of frameworks with an Array-API namespace share: the capabilities, the
    devices, the lowering table and the framework's version. A subclass places a case's arrays
    (`placed`), finds its GPU (`gpu`) and runs a case there (`_run`)."""

    name: str
    framework: str  # the distribution whose version results record
    capabilities = frozenset(
        {"if", "while", "nesting", "inplace", "combine_split", "double_grad", "indexing", "along_axis", "float32"}
    )
    devices: tuple[str, ...] = ("cpu", "gpu")
    table: dict[str, Lower]  # a subclass may lower some ops otherwise (tests plant bugs so)

    def __init__(self) -> None:
        self.version = framework_version(self.framework)  # (the framework is imported at the first case)
        self.device: Any = "cpu"

    def use_device(self, device: str) -> None:
        if device == "gpu":
            self.device = self.gpu()

    def gpu(self) -> Any:
        """The framework's first GPU device; a RuntimeError saying why where it has none."""
        raise NotImplementedError

    def placed(self) -> contextlib.AbstractContextManager[Any]:
        """Where the arrays a case makes go: `self.device`."""
        raise NotImplementedError

    def run(self, case: Case) -> BackendResult:
        with self.placed():
            return self._run(case)

    def _run(self, case: Case) -> BackendResult:
        raise NotImplementedError
