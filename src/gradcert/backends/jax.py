"""The `jax` and `jax-eager` backends: trace a case as a JAX function (float64, CPU) and ask
`jax.vjp` for the gradients.

Two code paths of JAX's (docs/torch-jax.md says what each certifies):

- staged: the whole request -- forward, `jax.vjp`, the cotangents applied, and for second order
  the `jax.vjp` of that -- traced under `jax.jit` and compiled by XLA once, with the flags a
  user's JAX has (docs/torch-jax.md says why not faster ones). A case whose loop trip count
  depends on a traced value (no `jax.jit` can express it) runs eagerly instead.
- eager: `jax.vjp` called eagerly, each primitive dispatched as it is met (control flow compiled
  where it is met), as a user's code without `jax.jit` runs.

`jax-jit` takes the staged path for every case, `jax-eager` the eager one, and `jax` the faster
for the case: staged where it has control flow, eager where it is straight-line; where staging
cannot express a case, `jax` runs its control flow as Python control flow, eagerly (below).

Lowering choices, every path:

- Every op with an Array-API kernel runs that kernel on `jax.numpy`; `pad` is `jnp.pad`.
- Indexing, slice assignment, the softmax family, scans and selections are the framework's own
  functions (docs/ops.md's table); a `scatter` that overwrites writes each row's last update
  only, since the framework leaves the winner of duplicate writes unspecified. In-place
  ops are their functional op (JAX arrays are immutable): what is certified is that the backward
  of the functional program is right.
- `if` is `lax.cond`, both branches traced; where a branch holds a loop whose trip count depends
  on a traced value (no `lax.cond` can hold it), the branch taken runs as Python control flow,
  eagerly.
- `while` needs its trip count when tracing: reverse mode through `lax.while_loop` is not
  supported by JAX. The trip count is found at trace time by running the condition and the part
  of the body it depends on (`trip_slice`); where it is concrete, the loop is
  `lax.fori_loop(0, trips, body)` with static bounds (a `scan`, which JAX reverses); where an
  inner loop's trip count depends on this loop's counter (abstract inside `fori_loop`), this loop
  is unrolled instead, its trips traced one by one. Eager `jax.vjp` knows a bound computed from a
  differentiated input at the top level, and in a branch taken as Python control flow (above).
  `jax`'s eager fallback (a case staging cannot express) runs its `if` and loops as Python
  control flow, as a user's eager code does; `jax-eager` keeps `lax.cond` and `fori_loop` eagerly.
- What does not depend on a differentiated input (constants, loop counters, inputs not
  differentiated) is computed with NumPy by the op's own kernel as the case is traced (`_JaxLowering`).
- `stop_gradient` values and the no-grad set are `lax.stop_gradient`.
- Contract mapping: JAX returns zeros, never `None`; a zero gradient of an input with no path to
  the outputs in the program is `None` (`contract.py`). Second order is `jax.vjp` of the function
  that returns the first-order gradients.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gradcert.backends.contract import free_to_contract, paths, second_order_to_contract
from gradcert.backends.lowering import (
    VECTORS,
    ArrayApiBackend,
    Lower,
    Lowering,
    kernels,
    refuse_second_order_no_grad,
    trip_slice,
)
from gradcert.backends.protocol import BackendResult, Unsupported
from gradcert.generators.case import Case
from gradcert.reference.ir import Operation
from gradcert.reference.ir.types import TensorType, is_differentiable
from gradcert.reference.ops import OPS
from gradcert.reference.ops.structure import slice_index

TRIP_LIMIT = 10_000

# where XLA's compiled executables are kept from run to run ("off": nowhere)
CACHE_ENV = "GRADCERT_JAX_CACHE"
# what the folder may hold: each run of new draws (a nightly fuzz) adds to it
CACHE_MAX_BYTES = 2 * 2**30


def compilation_cache() -> Path | None:
    """The folder of JAX's persistent compilation cache: `$GRADCERT_JAX_CACHE`, else
    `$XDG_CACHE_HOME/gradcert/jax` (`~/.cache/gradcert/jax`); None where it is "off"."""
    where = os.environ.get(CACHE_ENV, "")
    if where == "off":
        return None
    if where:
        return Path(where).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gradcert" / "jax"


def trim_cache(folder: Path, keep: int = CACHE_MAX_BYTES) -> int:
    """Where `folder` holds more than `keep` bytes, removes its least recently used files until it
    holds at most 80% of `keep` (a margin, so that the next runs do not trim again); returns the
    bytes removed. JAX bounds its own cache only by scanning the whole folder on every write."""
    entries = []
    for f in folder.glob("*"):
        with contextlib.suppress(FileNotFoundError):  # (another process trims too)
            st = f.stat()
            entries.append((max(st.st_atime, st.st_mtime), st.st_size, f))
    total = sum(size for _, size, _ in entries)
    if total <= keep:
        return 0
    removed = 0
    for _, size, f in sorted(entries, key=lambda e: e[0]):
        if total - removed <= 0.8 * keep:
            break
        f.unlink(missing_ok=True)
        removed += size
    return removed


def _python_flow(low: Lowering) -> bool:
    """Control flow as Python control flow: `jax`'s eager fallback (`_JaxLowering.python_flow`)."""
    return isinstance(low, _JaxLowering) and low.python_flow


def _if(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    if not _python_flow(low):
        try:
            return list(low.ns.lax.cond(a[0], lambda: low.nested(op.blocks[0]), lambda: low.nested(op.blocks[1])))
        except Unsupported:
            # a branch holds a loop whose trip count depends on a traced value, which no
            # `lax.cond` can hold (JAX cannot reverse-differentiate `lax.while_loop`); eagerly
            # the predicate is known, and the branch taken runs as Python control flow, as a
            # user's code without `jax.jit` runs it (staged, the predicate is abstract: the case
            # runs eagerly, `call`)
            pass
    try:
        taken = bool(a[0])
    except low.ns.errors.ConcretizationTypeError:
        raise Unsupported(
            "if: a branch's loop trip count depends on traced values, and so does the predicate"
        ) from None
    return low.nested(op.blocks[0 if taken else 1])


def _while(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    cond, body = op.blocks
    counted, ops = trip_slice(cond, body)
    carry, trips = list(a), 0
    while True:
        try:
            go = bool(low.nested(cond, carry)[0])
        except low.ns.errors.ConcretizationTypeError:
            raise Unsupported(
                "while: the trip count depends on traced values (JAX cannot reverse-differentiate lax.while_loop)"
            ) from None
        if not go:
            break
        for k, x in zip(counted, low.run_ops(body, carry, ops, counted)):
            carry[k] = x
        trips += 1
        if trips > TRIP_LIMIT:
            raise RuntimeError(f"while: more than {TRIP_LIMIT} trips")
    if trips == 0:
        return list(a)
    if not _python_flow(low):
        try:
            return list(low.ns.lax.fori_loop(0, trips, lambda i, c: low.nested(body, c), list(a)))
        except Unsupported:
            # an inner loop's trip count depends on this loop's (now abstract) carries: unrolled,
            # its trips traced one by one with concrete carries
            pass
    carry = list(a)
    for _ in range(trips):
        carry = low.nested(body, carry)
    return carry


def _pad(low: Lowering, op: Operation, a: list[Any]) -> Any:
    return low.ns.numpy.pad(a[0], list(zip(op.attrs["low"], op.attrs["high"])))


def _grid(low: Lowering, indices: Any, axis: int) -> tuple[Any, ...]:
    """Where each element of `indices` points, as a full index (`put_along_axis`)."""
    g = list(low.ns.numpy.indices(indices.shape, sparse=True))
    g[axis % indices.ndim] = indices
    return tuple(g)


def _at(low: Lowering, x: Any) -> Any:
    """`x.at`: on a jax Array (a constant folded at trace time is a NumPy-like array)."""
    return low.ns.numpy.asarray(x).at


def _put_along_axis(low: Lowering, op: Operation, a: list[Any]) -> Any:
    x, indices, values = a
    at = _at(low, x)[_grid(low, indices, op.attrs["axis"])]
    return at.add(values) if op.attrs["reduce"] == "add" else at.set(values)


def _scatter(low: Lowering, op: Operation, a: list[Any]) -> Any:
    """Rows written are zeroed, then updates added: all of them, or (overwrite) the last written
    to each row -- JAX leaves the winner of duplicate `.set` writes unspecified, and the index may
    be a traced value, so the winners are computed by JAX too."""
    jnp = low.ns.numpy
    x, index, updates = a
    cleared = _at(low, x)[index].set(0.0)
    if op.attrs["overwrite"]:
        order = jnp.arange(index.shape[0])
        later = (index[None, :] == index[:, None]) & (order[None, :] > order[:, None])
        won = jnp.reshape(~jnp.any(later, axis=1), (-1,) + (1,) * (updates.ndim - 1))
        updates = jnp.where(won, updates, 0.0)
    return cleared.at[index].add(updates)


def _topk(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    jnp, ax, sign = low.ns.numpy, op.attrs["axis"], 1.0 if op.attrs["largest"] else -1.0
    values, indices = low.ns.lax.top_k(jnp.moveaxis(sign * a[0], ax, -1), op.attrs["k"])
    return [sign * jnp.moveaxis(values, -1, ax), jnp.moveaxis(indices, -1, ax).astype(jnp.int64)]


def _at_axis(op: Operation, index: Any) -> tuple[Any, ...]:
    rank = op.operands[0].tensor.rank
    return tuple([slice(None)] * (op.attrs["axis"] % rank) + [index])


def _slices(op: Operation) -> tuple[slice, ...]:
    rank = op.operands[0].tensor.rank
    return slice_index(rank, op.attrs["axes"], op.attrs["starts"], op.attrs["ends"])


def _axes(op: Operation) -> tuple[int, ...] | None:
    return tuple(op.attrs["axes"]) or None


TABLE: dict[str, Lower] = {
    "if": _if,
    "while": _while,
    "pad": _pad,
    **VECTORS,
    "erf": lambda low, op, a: low.ns.lax.erf(a[0]),
    "gelu": lambda low, op, a: low.ns.nn.gelu(a[0], approximate=op.attrs["approximate"]),
    "softmax": lambda low, op, a: low.ns.nn.softmax(a[0], axis=op.attrs["axis"]),
    "log_softmax": lambda low, op, a: low.ns.nn.log_softmax(a[0], axis=op.attrs["axis"]),
    "logsumexp": lambda low, op, a: low.ns.nn.logsumexp(a[0], axis=_axes(op), keepdims=op.attrs["keepdim"]),
    "cumsum": lambda low, op, a: low.ns.lax.cumsum(
        a[0], axis=op.attrs["axis"] % a[0].ndim, reverse=op.attrs["reverse"]
    ),
    "topk": _topk,
    "p_norm": lambda low, op, a: low.ns.numpy.linalg.vector_norm(
        a[0], ord=op.attrs["p"], axis=op.attrs["axis"], keepdims=op.attrs["keepdim"]
    ),
    "index_add": lambda low, op, a: _at(low, a[0])[_at_axis(op, a[1])].add(a[2]),
    "put_along_axis": _put_along_axis,
    "scatter": _scatter,
    "set_value_with_tensor": lambda low, op, a: _at(low, a[0])[_slices(op)].set(a[1]),
    "set_value_with_tensor_": lambda low, op, a: _at(low, a[0])[_slices(op)].set(a[1]),
}


def _concrete(x: Any) -> bool:
    """A value known when the case is traced (not a JAX tracer): a NumPy array, or a vector of them."""
    if isinstance(x, list):
        return all(isinstance(t, np.ndarray) for t in x)
    return isinstance(x, np.ndarray)


class _JaxLowering(Lowering):
    """Values that do not depend on the differentiated inputs (constants, loop counters, the inputs
    not differentiated) are computed with NumPy as the case is traced, by the op's own kernel, as
    the interpreter computes them: JAX never sees them as ops, so no gradient can flow through them
    and nothing of JAX's AD is skipped, while the trip counts and predicates that tracing needs are
    known without dispatching (and compiling) a JAX primitive for each."""

    # control flow as Python control flow (`_python_flow`): in `jax`'s eager fallback, a case
    # staging cannot express runs as a user's eager code runs it, its `if` a Python `if` and its
    # loops Python loops (`lax.cond` and `scan` are certified by the cases staged); `jax-eager`
    # keeps them eagerly
    python_flow = False

    def op(self, op: Operation) -> None:
        d = OPS[op.name]
        args = [self.env[v] for v in op.operands]
        if (
            d.kernel is None
            or d.execution.run is not None
            or d.execution.effects
            or not all(isinstance(v.type, TensorType) for v in op.results)
            or not all(map(_concrete, args))
        ):
            return super().op(op)
        out = d.kernel(np, *args, **op.attrs)
        results = [np.array(x) for x in out] if d.execution.multi else [np.array(out)]
        for v, x in zip(op.results, results, strict=True):
            self.env[v] = x  # (a constant's gradient is stopped already)

    def stop(self, x: Any) -> Any:
        return x if isinstance(x, np.ndarray) else self.ns.lax.stop_gradient(x)


class JaxBackend(ArrayApiBackend):
    """A case with control flow staged (traced whole under `jax.jit`, compiled once; eagerly where
    a trip count depends on a traced value), a straight-line case eager: `jax-jit` and
    `jax-eager` take one path for every case."""

    name = "jax"
    framework = "jax"
    table = TABLE
    staged: bool | str = "auto"
    platform = "cpu"  # the platforms JAX is imported with: "cpu" alone, else every one it finds

    def gpu(self) -> Any:
        self.platform = "gpu"
        try:
            return self.jax.devices("gpu")[0]
        except RuntimeError as e:  # jaxlib without CUDA, or no device
            raise RuntimeError(f"JAX {self.jax.__version__} finds no GPU ({' '.join(str(e).split())[:200]})") from None

    def placed(self) -> Any:
        # (the inputs, and every array a kernel makes)
        return contextlib.nullcontext() if self.device == "cpu" else self.jax.default_device(self.device)

    @functools.cached_property
    def jax(self) -> Any:
        if self.platform == "cpu":
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax

        jax.config.update("jax_enable_x64", True)
        # XLA's compilation is most of a case's time, and the same programs are drawn run after
        # run (certify derandomizes): executables are kept on disk, every one of them (JAX keeps
        # only those that took a second by default), keyed by the module, JAX's version and
        # XLA's flags -- what runs is what XLA compiled for this very module; the least recently
        # used are removed past `CACHE_MAX_BYTES` as the backend starts (`trim_cache`)
        if (cache := compilation_cache()) is not None and jax.config.jax_compilation_cache_dir is None:
            if cache.is_dir():
                trim_cache(cache)
            jax.config.update("jax_compilation_cache_dir", str(cache))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        return jax

    def run(self, case: Case) -> BackendResult:
        refuse_second_order_no_grad(case, "JAX")
        return super().run(case)

    def _run(self, case: Case) -> BackendResult:
        jax, jnp = self.jax, self.jax.numpy
        t0 = time.perf_counter()
        # only float inputs are differentiated; the others are constants of the traced function
        free = [
            k
            for k, i in enumerate(case.wrt)
            if isinstance(t := case.program.inputs[i].type, TensorType) and is_differentiable(t)
        ]
        primals = [np.asarray(case.inputs[case.wrt[k]]) for k in free]

        def f(*xs: Any) -> tuple[list[Any], list[Any]]:
            low = _JaxLowering("jax", self.table, jax, kernels(jnp), case.no_grad)
            low.python_flow = self.staged == "auto" and not staged
            given = {case.wrt[k]: x for k, x in zip(free, xs)}
            for i, (v, x) in enumerate(zip(case.program.inputs, case.inputs)):
                low.env[v] = low.result(v, given[i] if i in given else np.asarray(x))
            low.run_block(case.program.block)
            return [low.env[v] for v in case.output_values], [low.env[v] for v in case.program.outputs]

        def first(*xs: Any) -> tuple[list[Any], list[Any]]:
            """The first-order gradients (one per free input), and the program's outputs."""
            ys, vjp, outputs = jax.vjp(f, *xs, has_aux=True)
            cots = case.cotangents
            return list(
                vjp([jnp.ones_like(y) for y in ys] if cots is None else [jnp.asarray(u) for u in cots])
            ), outputs

        # (auto: control flow staged, where compiling the whole case beats compiling each
        # `lax.cond` and `scan` as it is met; straight-line cases eager, their primitives compiled
        # once per shape and reused from case to case)
        staged = any(op.blocks for op in case.program.walk()) if self.staged == "auto" else self.staged

        def call(fn: Callable[..., Any], *xs: Any) -> Any:
            """`fn` staged (traced under `jax.jit`, compiled once), or eagerly where it must be."""
            nonlocal staged
            if staged:
                try:
                    return jax.jit(fn)(*xs)
                except (Unsupported, jax.errors.ConcretizationTypeError):
                    staged = False  # a trip count that depends on a traced value
            return fn(*xs)

        cots2 = case.cotangents2
        # second order: the first-order gradients that are not None are those of the inputs with a
        # path (`contract.paths`) where JAX is right; both orders are then one function, traced
        # and compiled once, and the guess is checked against the first-order answer
        guess = [j for j, k in enumerate(free) if paths(case, 1)[k]] if case.order == 2 else []
        if case.order == 2 and (cots2 is None or len(cots2) == len(guess)):

            def both(*xs: Any) -> tuple[list[Any], list[Any], list[Any]]:
                def kept(*xs: Any) -> tuple[list[Any], list[Any]]:
                    gs = first(*xs)[0]
                    return [gs[j] for j in guess], gs

                ks, vjp2, gs = jax.vjp(kept, *xs, has_aux=True)
                u = [jnp.ones_like(g) for g in ks] if cots2 is None else [jnp.asarray(w) for w in cots2]
                return gs, list(vjp2(u)), ks

            got, got2, forward = call(both, *primals)
        else:
            (got, forward), got2 = call(first, *primals), []
        got = [np.asarray(g) for g in got]
        if case.order == 2:

            def again(keep: list[int]) -> tuple[list[Any], list[Any]]:
                def second(*xs: Any) -> tuple[list[Any], list[Any]]:
                    gs, vjp2 = jax.vjp(lambda *xs: [first(*xs)[0][j] for j in keep], *xs)
                    u = [jnp.ones_like(g) for g in gs] if cots2 is None else [jnp.asarray(w) for w in cots2]
                    return list(vjp2(u)), gs

                out: tuple[list[Any], list[Any]] = call(second, *primals)
                return out

            result, forward = second_order_to_contract(case, free, got, guess, got2, again)
        else:
            result = self._contract(case, free, got, 1)
        t1 = time.perf_counter()
        return BackendResult(
            [None if g is None else np.asarray(g) for g in result],
            self.version,
            {"backend": t1 - t0},
            forward=[np.asarray(y) for y in forward],
        )

    def _contract(self, case: Case, free: list[int], got: Sequence[Any], order: int) -> list[Any]:
        """One gradient per `case.wrt` (None for the inputs not differentiated), as the contract says."""
        return free_to_contract(case, free, got, order)


class JaxEagerBackend(JaxBackend):
    """Eager: `jax.vjp` traced op by op, each primitive dispatched (and compiled for its shapes)
    as it is met, control flow compiled where it is met: the path of a user's code run without
    `jax.jit`."""

    name = "jax-eager"
    staged = False


class JaxJitBackend(JaxBackend):
    """Staged: every request traced whole under `jax.jit` and compiled once, the path of a user's
    code under `jax.jit`."""

    name = "jax-jit"
    staged = True
