"""The `tensorflow` backend: lowers a case into one `tf.function` graph (float64 or float32, CPU)
and asks `tf.GradientTape` for the gradients inside it.

Lowering choices (docs/tensorflow.md says what was measured):

- Every op with an Array-API kernel runs that kernel on `TfNamespace`, the Array-API names mapped
  onto TensorFlow's own ops (`tf.math`, `tf.linalg`, and `tf.experimental.numpy` where it serves:
  `matmul` of vectors, `take_along_axis`), so TensorFlow's ops, and their registered gradients, do
  the work. A table entry exists only where the kernel writes into a copy (NumPy-style slice
  assignment, which TensorFlow's immutable tensors lack) or where TensorFlow has its own function
  (`tf.nn.softmax`, `tf.math.cumsum`, `tf.math.top_k`, `tf.norm`, `tf.math.erf`, `tf.pad`,
  `tf.tensor_scatter_nd_*` for the scatters, slice assignment included); `gelu` is its formula on
  `tf.math.erf` (`_gelu` says why not `tf.nn.gelu`).
- `if` is `tf.cond` (cond_v2: both branches traced into functions of their own); `while` is
  `tf.while_loop` (while_v2; its gradient keeps each trip's values in TensorList accumulators).
  Nothing of the loop is known when the graph is built: the trip count is the graph's.
- In-place ops are their functional op (TensorFlow's tensors are immutable): what is certified is
  that the backward of the functional program is right.
- `stop_gradient` values and the no-grad set are `tf.stop_gradient` where they are defined. A
  no-grad set at second order is beyond the adapter (`refuse_second_order_no_grad`: a stop at the
  definition stops every order; TensorFlow has no per-call no-grad set).
- Gradients: `tape.gradient(outputs, inputs, output_gradients=cotangents)` with TensorFlow's
  default `unconnected_gradients=NONE` (no cotangents given: TensorFlow's own ones), the float
  inputs differentiated watched by the tape; second order by a second tape around the first,
  `outer.gradient(first_order, inputs, output_gradients=cotangents2)`.
- Contract mapping (`contract.py`): TensorFlow returns `None` for an input the tape recorded no
  path from, and zeros for one read only in the branch `tf.cond` did not take (cond_v2's gradient
  has both branches); no path in the program and `None` or zeros: `None`; a path and `None`: zeros.
- A cotangent of the wrong shape is handed to `tape.gradient` as the request gives it: the tape
  checks no shapes, so what happens is TensorFlow's (docs/tensorflow.md).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gradcert.backends.contract import free_to_contract, paths, second_order_to_contract
from gradcert.backends.lowering import (
    VECTORS,
    ArrayApiBackend,
    Lower,
    Lowering,
    flatten,
    kernels,
    refuse_second_order_no_grad,
    types_of,
    unflatten,
)
from gradcert.backends.protocol import BackendResult
from gradcert.generators.case import Case
from gradcert.reference.ir import Operation
from gradcert.reference.ir.types import TensorType, is_differentiable
from gradcert.reference.ops.structure import slice_index


class TfNamespace:
    """The Array-API names the op kernels call (`OpDef.kernel(xp, ...)`), each TensorFlow's own op.
    Python scalars meet tensors through TensorFlow's operators, which take the tensor's dtype."""

    def __init__(self, tf: Any) -> None:
        self.tf = tf
        tnp = tf.experimental.numpy
        self.float64, self.float32, self.int64, self.bool = tf.float64, tf.float32, tf.int64, tf.bool
        m = tf.math
        self.tanh, self.sin, self.cos, self.exp, self.log = m.tanh, m.sin, m.cos, m.exp, m.log
        self.sqrt, self.abs, self.sign, self.pow = m.sqrt, m.abs, m.sign, m.pow
        self.maximum, self.minimum, self.where = m.maximum, m.minimum, tf.where
        self.zeros_like, self.broadcast_to, self.expand_dims = tf.zeros_like, tf.broadcast_to, tf.expand_dims
        self.matmul, self.take_along_axis = tnp.matmul, tnp.take_along_axis  # (vectors; the index grid)

    def _reduce(self, fn: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return fn(x, axis=None if axis is None else list(np.atleast_1d(axis)), keepdims=keepdims)

    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce(self.tf.math.reduce_sum, x, axis, keepdims)

    def mean(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce(self.tf.math.reduce_mean, x, axis, keepdims)

    def max(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce(self.tf.math.reduce_max, x, axis, keepdims)

    def min(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce(self.tf.math.reduce_min, x, axis, keepdims)

    def prod(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce(self.tf.math.reduce_prod, x, axis, keepdims)

    def reshape(self, x: Any, shape: Sequence[int]) -> Any:
        return self.tf.reshape(x, list(shape))

    def permute_dims(self, x: Any, axes: Sequence[int]) -> Any:
        return self.tf.transpose(x, list(axes))

    def squeeze(self, x: Any, axis: Sequence[int]) -> Any:
        return self.tf.squeeze(x, axis=list(axis))

    def full(self, shape: Sequence[int], value: float, dtype: Any) -> Any:
        return self.tf.fill(list(shape), self.tf.cast(self.tf.constant(value, self.tf.float64), dtype))

    def full_like(self, x: Any, value: float) -> Any:
        return self.full(x.shape, value, x.dtype)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        return self.tf.zeros(list(shape), dtype)

    def astype(self, x: Any, dtype: Any) -> Any:
        return self.tf.cast(x, dtype)

    def asarray(self, x: Any, dtype: Any = None, copy: bool | None = None) -> Any:
        return self.tf.convert_to_tensor(x, dtype)

    def concat(self, xs: Sequence[Any], axis: int = 0) -> Any:
        return self.tf.concat(list(xs), axis)

    def stack(self, xs: Sequence[Any], axis: int = 0) -> Any:
        return self.tf.stack(list(xs), axis)

    def flip(self, x: Any, axis: int) -> Any:
        return self.tf.reverse(x, [axis])

    def cumulative_sum(self, x: Any, axis: int) -> Any:
        return self.tf.math.cumsum(x, axis=axis)

    def cumulative_prod(self, x: Any, axis: int) -> Any:
        return self.tf.math.cumprod(x, axis=axis)

    def take(self, x: Any, index: Any, axis: int) -> Any:
        return self.tf.gather(x, index, axis=axis)

    def clip(self, x: Any, lo: float, hi: float) -> Any:
        return self.tf.clip_by_value(x, lo, hi)

    def arange(self, n: int) -> Any:
        return self.tf.range(n, dtype=self.tf.int64)


def _if(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    tf, types = low.ns, types_of(op.results)
    if not op.results:
        return []  # (its branches compute nothing the program reads)
    out = tf.cond(
        a[0],
        lambda: flatten(low.nested(op.blocks[0]), types),
        lambda: flatten(low.nested(op.blocks[1]), types),
    )
    return unflatten(list(out), types)


def _while(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    tf, types = low.ns, types_of(op.operands)
    cond, body = op.blocks
    out = tf.while_loop(
        lambda *c: low.nested(cond, unflatten(c, types))[0],
        lambda *c: flatten(low.nested(body, unflatten(c, types)), types),
        flatten(a, types),
    )
    return unflatten(list(out), types)


def _moved(tf: Any, x: Any, ax: int) -> Any:
    """`x` with axis `ax` first."""
    perm = [ax, *(d for d in range(x.shape.rank) if d != ax)]
    return tf.transpose(x, perm)


def _unmoved(tf: Any, x: Any, ax: int) -> Any:
    """The inverse of `_moved`."""
    perm = list(range(1, ax + 1)) + [0] + list(range(ax + 1, x.shape.rank))
    return tf.transpose(x, perm)


def _index_add(low: Lowering, op: Operation, a: list[Any]) -> Any:
    tf, (x, index, value) = low.ns, a
    ax = op.attrs["axis"] % x.shape.rank
    out = tf.tensor_scatter_nd_add(_moved(tf, x, ax), index[:, None], _moved(tf, value, ax))
    return _unmoved(tf, out, ax)


def _grid(tf: Any, shape: Sequence[int], starts: Sequence[int] = ()) -> Any:
    """The full index of every element of a block of `shape` (offset by `starts`): shape
    (*shape, rank), int64."""
    starts = list(starts) or [0] * len(shape)
    axes = [tf.range(s, s + n, dtype=tf.int64) for s, n in zip(starts, shape)]
    return tf.stack(tf.meshgrid(*axes, indexing="ij"), axis=-1)


def _put_along_axis(low: Lowering, op: Operation, a: list[Any]) -> Any:
    tf, (x, indices, values) = low.ns, a
    ax = op.attrs["axis"] % x.shape.rank
    grid = _grid(tf, indices.shape)
    where = tf.concat([grid[..., :ax], indices[..., None], grid[..., ax + 1 :]], axis=-1)
    if op.attrs["reduce"] == "add":
        return tf.tensor_scatter_nd_add(x, where, values)
    return tf.tensor_scatter_nd_update(x, where, values)


def _scatter(low: Lowering, op: Operation, a: list[Any]) -> Any:
    """Rows written are zeroed, then updates added: all of them, or (overwrite) the last written to
    each row -- TensorFlow leaves the winner of duplicate updates unspecified, so the winners are
    computed in the graph from the index."""
    tf, (x, index, updates) = low.ns, a
    rows = index[:, None]
    cleared = tf.tensor_scatter_nd_update(x, rows, tf.zeros_like(updates))
    if op.attrs["overwrite"]:
        n = tf.shape(index, out_type=tf.int64)[0]
        order = tf.range(n)
        later = (index[None, :] == index[:, None]) & (order[None, :] > order[:, None])
        won = tf.reshape(tf.logical_not(tf.reduce_any(later, axis=1)), [-1] + [1] * (updates.shape.rank - 1))
        updates = tf.where(won, updates, tf.zeros_like(updates))
    return tf.tensor_scatter_nd_add(cleared, rows, updates)


def _set_value(low: Lowering, op: Operation, a: list[Any]) -> Any:
    """Slice assignment: the slice's elements replaced by `value` (`tensor_scatter_nd_update` at
    the slice's index grid)."""
    tf, (x, value) = low.ns, a
    idx = slice_index(x.shape.rank, op.attrs["axes"], op.attrs["starts"], op.attrs["ends"])
    ranges = [range(*s.indices(n)) for s, n in zip(idx, x.shape)]
    shape = [len(r) for r in ranges]
    grid = _grid(tf, shape, [r.start for r in ranges])
    return tf.tensor_scatter_nd_update(x, grid, tf.broadcast_to(value, shape))


def _topk(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    tf, x = low.ns, a[0]
    ax, sign = op.attrs["axis"] % x.shape.rank, 1.0 if op.attrs["largest"] else -1.0
    last = x.shape.rank - 1
    perm = list(range(x.shape.rank))
    perm[ax], perm[last] = perm[last], perm[ax]
    values, indices = tf.math.top_k(tf.transpose(sign * x, perm), k=op.attrs["k"], sorted=True)
    return [sign * tf.transpose(values, perm), tf.cast(tf.transpose(indices, perm), tf.int64)]


def _gelu(low: Lowering, op: Operation, a: list[Any]) -> Any:
    """The op's own formula on TensorFlow's `erf` (or `tanh`), not `tf.nn.gelu`: in float64,
    `tf.nn.gelu` computes with float32 roundings of its constants (`math_ops.cast(0.7071067811865476,
    dtype)` casts a float32 constant), so its forward is off by up to 5e-9 relative, which the
    lowering check would blame on the adapter (docs/tensorflow.md)."""
    tf, x = low.ns, a[0]
    if op.attrs["approximate"]:
        return 0.5 * x * (1.0 + tf.math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1.0 + tf.math.erf(x * 0.7071067811865476))


def _axes(op: Operation) -> list[int] | None:
    return list(op.attrs["axes"]) or None


TABLE: dict[str, Lower] = {
    "if": _if,
    "while": _while,
    **VECTORS,
    "pad": lambda low, op, a: low.ns.pad(a[0], [list(p) for p in zip(op.attrs["low"], op.attrs["high"])]),
    "erf": lambda low, op, a: low.ns.math.erf(a[0]),
    "gelu": _gelu,
    "softmax": lambda low, op, a: low.ns.nn.softmax(a[0], axis=op.attrs["axis"]),
    "log_softmax": lambda low, op, a: low.ns.nn.log_softmax(a[0], axis=op.attrs["axis"]),
    "logsumexp": lambda low, op, a: low.ns.math.reduce_logsumexp(a[0], axis=_axes(op), keepdims=op.attrs["keepdim"]),
    "cumsum": lambda low, op, a: low.ns.math.cumsum(a[0], axis=op.attrs["axis"], reverse=op.attrs["reverse"]),
    "cumprod": lambda low, op, a: low.ns.math.cumprod(a[0], axis=op.attrs["axis"]),
    "topk": _topk,
    "p_norm": lambda low, op, a: low.ns.norm(
        a[0], ord=op.attrs["p"], axis=op.attrs["axis"], keepdims=op.attrs["keepdim"]
    ),
    "index_add": _index_add,
    "put_along_axis": _put_along_axis,
    "scatter": _scatter,
    "set_value_with_tensor": _set_value,
    "set_value_with_tensor_": _set_value,
}


class _TfLowering(Lowering):
    def stop(self, x: Any) -> Any:
        return self.ns.stop_gradient(x)


class TensorflowBackend(ArrayApiBackend):
    """Every case one `tf.function` graph (`autograph=False`: the lowering's Python runs once, as it
    traces), its gradients taken by `tf.GradientTape` inside the graph."""

    name = "tensorflow"
    framework = "tensorflow"
    devices = ("cpu",)  # (tensorflow-cpu)
    table = TABLE

    @functools.cached_property
    def tf(self) -> Any:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # (its start-up notes on stderr)
        import tensorflow as tf

        return tf

    @functools.cached_property
    def xp(self) -> TfNamespace:
        return TfNamespace(self.tf)

    def placed(self) -> Any:
        return self.tf.device("/CPU:0")

    def run(self, case: Case) -> BackendResult:
        refuse_second_order_no_grad(case, "TensorFlow")
        return super().run(case)

    def _function(self, case: Case, free: list[int], keep: list[int]) -> Any:
        """The request as one graph: (first-order gradients, one per free input, None where the tape
        gives none; second-order ones; the program's outputs, or at order 2 the first-order
        gradients at `keep` differentiated again)."""
        tf = self.tf

        def dense(gs: list[Any]) -> list[Any]:
            # (a gather's gradient is an `IndexedSlices`, TensorFlow's sparse gradient: as a user
            # reads it, a tensor)
            return [None if g is None else tf.convert_to_tensor(g) for g in gs]

        def request(xs: list[Any], cots: list[Any] | None, cots2: list[Any] | None) -> Any:
            wrt = [xs[case.wrt[k]] for k in free]
            # (the second tape only at second order: with two tapes watching, TensorFlow wraps every
            # `cond` and `while` in a function of its own, built with its gradient as it is traced)
            second = case.order == 2
            outer: Any = tf.GradientTape(watch_accessed_variables=False) if second else contextlib.nullcontext()
            with outer:
                if second:
                    outer.watch(wrt)
                with tf.GradientTape(watch_accessed_variables=False) as tape:
                    tape.watch(wrt)
                    low = _TfLowering("tensorflow", self.table, tf, kernels(self.xp), case.no_grad)
                    for v, x in zip(case.program.inputs, xs):
                        low.env[v] = low.result(v, x)
                    low.run_block(case.program.block)
                ys = [low.env[v] for v in case.output_values]
                gs = dense(tape.gradient(ys, wrt, output_gradients=cots))
                if second:
                    # (a path in the program and no gradient: zeros, as the contract maps them)
                    ks = [tf.zeros_like(wrt[j]) if gs[j] is None else gs[j] for j in keep]
            if second:
                return gs, dense(outer.gradient(ks, wrt, output_gradients=cots2)), ks
            return gs, [], [low.env[v] for v in case.program.outputs]

        return tf.function(request, autograph=False)

    def _run(self, case: Case) -> BackendResult:
        tf = self.tf
        t0 = time.perf_counter()
        # only float inputs are differentiated (watched by the tape); the others are constants
        free = [
            k
            for k, i in enumerate(case.wrt)
            if isinstance(t := case.program.inputs[i].type, TensorType) and is_differentiable(t)
        ]
        xs = [tf.constant(np.asarray(x)) for x in case.inputs]
        cots = None if case.cotangents is None else [tf.constant(np.asarray(u)) for u in case.cotangents]
        cots2 = case.cotangents2
        # second order: the first-order gradients differentiated again are those not None after the
        # contract mapping, guessed from the program's paths and checked against the answer
        keep = [j for j, k in enumerate(free) if paths(case, 1)[k]] if case.order == 2 else []
        u2 = None if cots2 is None else [tf.constant(np.asarray(w)) for w in cots2]
        if case.order == 2 and u2 is not None and len(u2) != len(keep):
            u2 = None  # (a count the lowering oracle reports; checked below)
        got, got2, forward = self._function(case, free, keep)(xs, cots, u2)
        if case.order == 2:

            def again(kept: list[int]) -> tuple[Any, Any]:
                u2 = None if cots2 is None else [tf.constant(np.asarray(w)) for w in cots2]
                _, got2, forward = self._function(case, free, kept)(xs, cots, u2)
                return got2, forward

            result, forward = second_order_to_contract(case, free, got, keep, got2, again)
        else:
            result = free_to_contract(case, free, got, 1)
        t1 = time.perf_counter()
        return BackendResult(
            [None if g is None else np.asarray(g) for g in result],
            self.version,
            {"backend": t1 - t0},
            forward=[np.asarray(y) for y in forward],
        )
