"""The `paddle` backend: lowers a case to a Paddle static PIR program (float64, CPU), builds its
gradients with `paddle.autograd.ir_backward.grad` (or `append_backward`, for that area), runs it
with the static executor and lists the program's ops for the structural invariants.

Lowering choices (docs/paddle.md says what was measured):

- `if` is `paddle.static.nn.cond`, `while` is `paddle.static.nn.while_loop`; vectors cross them as
  flat lists of tensors (both APIs flatten nested lists anyway).
- In-place ops are Paddle's real in-place PIR ops (`paddle._C_ops.tanh_` and friends: the public
  `paddle.tanh_` emits the out-of-place op in static mode). `neg_` has no `_C_ops` twin; it is
  `scale_(x, -1, 0)`, also a real in-place op.
- Vectors are Python lists: `combine` is what Paddle's list-taking APIs build (`builtin.combine`),
  `split` takes a list-returning API's results apart.
- The `append_backward` area lowers every input that takes a gradient as a persistable parameter
  (initialised by the startup program) and calls `append_backward(loss)` with no parameter list.
- The executor runs a program's ops one after another on the calling thread
  (`FLAGS_new_executor_serial_run`, what `BuildStrategy.sequential_run` sets; an environment
  variable of that name overrides it), so that a verdict repeats from run to run: with Paddle's
  default thread pool, the buffer its inplace pass shares between two live values was written
  before or after the fetch as the threads fell (docs/paddle.md, finding 15); and with
  two workers each worker's pool takes the other's core. The transform under test,
  `ir_backward.grad`, is the same either way.

Run it isolated (the default for every backend but the reference): Paddle's native code can abort
the process.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcert.backends.lowering import DTYPE_NAMES, VECTORS, Lower, Lowering, flatten, types_of, unflatten
from gradcert.backends.protocol import TOLERANCES, BackendResult, OpRecord, Unsupported, close
from gradcert.backends.reference import ReferenceBackend
from gradcert.backends.registry import framework_version
from gradcert.generators.case import Case
from gradcert.reference.interpreter import run
from gradcert.reference.ir import Block, Operation, Value
from gradcert.reference.ir.types import TensorType, is_differentiable
from gradcert.reference.ops import OPS
from gradcert.reference.ops.structure import slice_index

# ops that keep a stack balanced or end a block: never dead, whatever their uses
_EFFECTS = frozenset({"cf.tuple_push", "cf.tuple_pop", "cf.stack_create", "cf.yield", "cf.has_elements"})
_ZERO_FILL = frozenset({"pd_op.full_like", "pd_op.full"})
FORWARD_RUNS = 8  # runs of the forward program alone that tell a lowering bug from a varying output
SERIAL = "FLAGS_new_executor_serial_run"  # the executor's ops in order on one thread (module docstring)
INPLACE_PASS = "FLAGS_pir_apply_inplace_pass"  # the executor lets a result take over a dead operand's buffer


def _unary(name: str) -> Lower:
    return lambda low, op, a: getattr(low.ns, name)(a[0])


def _inplace(name: str) -> Lower:
    return lambda low, op, a: getattr(low.ns._C_ops, name)(*a)


def _binary(name: str) -> Lower:
    return lambda low, op, a: getattr(low.ns, name)(a[0], a[1])


def _if(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    types = types_of(op.results)

    def branch(k: int) -> Any:
        def fn() -> Any:
            ys = flatten(_yields(low, op.blocks[k], low.run_block(op.blocks[k])), types)
            return ys or None

        return fn

    out = low.ns.static.nn.cond(a[0], branch(0), branch(1))
    flat = [] if out is None else list(out) if isinstance(out, (list, tuple)) else [out]
    return unflatten(flat, types)


def _overwritten(v: Value) -> bool:
    """Whether an in-place op of the program writes `v`."""
    for u in v.uses:
        k = OPS[u.name].autodiff.inplace_of
        if k is not None and u.operands[k] is v:
            return True
    return False


def _yields(low: Lowering, block: Block, ys: list[Any]) -> list[Any]:
    """A block's yields, each tensor defined outside the block copied (`assign`): the IR's values
    cross a block boundary by copy, where Paddle's `if` and `while` results may share the buffer
    of an outer value they yield, so that an in-place op on the result would write the outer
    value (Python's aliasing, which `to_static` keeps)."""
    term = block.terminator
    assert term is not None
    return [
        low.ns.assign(y) if isinstance(v.type, TensorType) and not block.encloses(v.block) else y
        for v, y in zip(term.operands, ys)
    ]


def _while(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    cond, body = op.blocks
    types = types_of(op.operands)
    if any(_overwritten(r) for r in op.results):  # (a loop of no trip returns its operands: as `_yields`)
        a = [low.ns.assign(x) if isinstance(v.type, TensorType) else x for v, x in zip(op.operands, a)]
    out = low.ns.static.nn.while_loop(
        lambda *xs: low.run_block(cond, unflatten(xs, types))[0],
        lambda *xs: flatten(_yields(low, body, low.run_block(body, unflatten(xs, types))), types),
        flatten(a, types),
    )
    return unflatten(list(out), types)


def _const(low: Lowering, op: Operation, attr: str) -> Any:
    # `pd_op.scale` keeps its scale and bias as float32 attributes, which rounds a float64
    # program's constants (measured: 1e-8 relative): scale is lowered as multiply and add by
    # constants of the operand's dtype instead (in place: `multiply_` then `add_`)
    return low.ns.full([], op.attrs[attr], DTYPE_NAMES[op.operands[0].tensor.dtype])


def _axes(op: Operation) -> list[int] | None:
    return list(op.attrs["axes"]) or None


def _slice_attrs(op: Operation) -> tuple[list[int], list[int], list[int], list[int]]:
    """starts, ends, steps, axes of a slice assignment."""
    n = len(op.attrs["axes"])
    return list(op.attrs["starts"]), list(op.attrs["ends"]), [1] * n, list(op.attrs["axes"])


def _index_of(op: Operation) -> tuple[slice, ...]:
    rank = op.operands[0].tensor.rank
    return slice_index(rank, op.attrs["axes"], op.attrs["starts"], op.attrs["ends"])


def _pad(low: Lowering, op: Operation, a: list[Any]) -> Any:
    pad = [n for lo, hi in zip(op.attrs["low"], op.attrs["high"]) for n in (lo, hi)]
    return low.ns.nn.functional.pad(a[0], pad, mode="constant", value=0.0)


def _full(low: Lowering, op: Operation, a: list[Any]) -> Any:
    dtype = op.attrs["dtype"]
    value = bool(op.attrs["value"]) if dtype == "bool" else op.attrs["value"]
    return low.ns.full(list(op.attrs["shape"]), value, DTYPE_NAMES[dtype])


TABLE: dict[str, Lower] = {
    "if": _if,
    "while": _while,
    **{n: _unary(n) for n in ("tanh", "sin", "cos", "exp", "log", "abs", "sign", "sqrt", "square", "reciprocal")},
    "sigmoid": lambda low, op, a: low.ns.nn.functional.sigmoid(a[0]),
    "relu": lambda low, op, a: low.ns.nn.functional.relu(a[0]),
    "neg": lambda low, op, a: low.ns.neg(a[0]),
    "scale": lambda low, op, a: low.ns.add(low.ns.multiply(a[0], _const(low, op, "scale")), _const(low, op, "bias")),
    **{n: _inplace(n) for n in ("tanh_", "sin_", "exp_", "sigmoid_", "relu_", "abs_", "square_")},
    **{n: _inplace(n) for n in ("add_", "subtract_", "multiply_", "divide_")},
    "neg_": lambda low, op, a: low.ns._C_ops.scale_(a[0], -1.0, 0.0, True),
    "scale_": lambda low, op, a: low.ns._C_ops.add_(
        low.ns._C_ops.multiply_(a[0], _const(low, op, "scale")), _const(low, op, "bias")
    ),
    **{n: _binary(n) for n in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "pow", "matmul")},
    **{n: _binary(n) for n in ("less_than", "less_equal", "greater_than", "greater_equal")},
    "sum": lambda low, op, a: low.ns.sum(a[0], axis=_axes(op), keepdim=op.attrs["keepdim"]),
    "mean": lambda low, op, a: low.ns.mean(a[0], axis=_axes(op), keepdim=op.attrs["keepdim"]),
    "reshape": lambda low, op, a: low.ns.reshape(a[0], list(op.attrs["shape"])),
    "transpose": lambda low, op, a: low.ns.transpose(a[0], list(op.attrs["perm"])),
    "slice": lambda low, op, a: low.ns.slice(
        a[0], list(op.attrs["axes"]), list(op.attrs["starts"]), list(op.attrs["ends"])
    ),
    "pad": _pad,
    "expand": lambda low, op, a: low.ns.expand(a[0], list(op.attrs["shape"])),
    "squeeze": lambda low, op, a: low.ns.squeeze(a[0], axis=list(op.attrs["axes"])),
    "unsqueeze": lambda low, op, a: low.ns.unsqueeze(a[0], axis=list(op.attrs["axes"])),
    "full": _full,
    "full_like": lambda low, op, a: low.ns.full_like(a[0], op.attrs["value"]),
    "cast": lambda low, op, a: low.ns.cast(a[0], DTYPE_NAMES[op.attrs["dtype"]]),
    "assign": lambda low, op, a: low.ns.assign(a[0]),
    "where": lambda low, op, a: low.ns.where(a[0], a[1], a[2]),
    **VECTORS,
    "concat": lambda low, op, a: low.ns.concat(a[0], axis=op.attrs["axis"]),
    "split_with_sections": lambda low, op, a: list(
        low.ns.split(a[0], list(op.attrs["sections"]), axis=op.attrs["axis"])
    ),
    "stack": lambda low, op, a: low.ns.stack(a[0], axis=op.attrs["axis"]),
    "unbind": lambda low, op, a: list(low.ns.unbind(a[0], axis=op.attrs["axis"])),
    "add_n": lambda low, op, a: low.ns.add_n(a[0]),
    "erf": _unary("erf"),
    "gelu": lambda low, op, a: low.ns.nn.functional.gelu(a[0], approximate=op.attrs["approximate"]),
    # (bounds as tensors of the operand's dtype: as attributes `pd_op.clip` keeps them in float32,
    # which moves a float64 bound by up to 1e-9)
    "clip": lambda low, op, a: low.ns.clip(a[0], _const(low, op, "min"), _const(low, op, "max")),
    "softmax": lambda low, op, a: low.ns.nn.functional.softmax(a[0], axis=op.attrs["axis"]),
    "log_softmax": lambda low, op, a: low.ns.nn.functional.log_softmax(a[0], axis=op.attrs["axis"]),
    "logsumexp": lambda low, op, a: low.ns.logsumexp(a[0], axis=_axes(op), keepdim=op.attrs["keepdim"]),
    "max": lambda low, op, a: low.ns.max(a[0], axis=_axes(op), keepdim=op.attrs["keepdim"]),
    "min": lambda low, op, a: low.ns.min(a[0], axis=_axes(op), keepdim=op.attrs["keepdim"]),
    "prod": lambda low, op, a: low.ns.prod(a[0], axis=_axes(op), keepdim=op.attrs["keepdim"]),
    # (`paddle.cumsum` has no `reverse`; its op does: x, axis, flatten, exclusive, reverse)
    "cumsum": lambda low, op, a: low.ns._C_ops.cumsum(a[0], op.attrs["axis"], False, False, op.attrs["reverse"]),
    "cumprod": lambda low, op, a: low.ns.cumprod(a[0], dim=op.attrs["axis"]),
    "topk": lambda low, op, a: list(
        low.ns.topk(a[0], op.attrs["k"], axis=op.attrs["axis"], largest=op.attrs["largest"], sorted=True)
    ),
    "p_norm": lambda low, op, a: low.ns.linalg.norm(
        a[0], p=op.attrs["p"], axis=op.attrs["axis"], keepdim=op.attrs["keepdim"]
    ),
    "gather": lambda low, op, a: low.ns.gather(a[0], a[1], axis=op.attrs["axis"]),
    "index_select": lambda low, op, a: low.ns.index_select(a[0], a[1], axis=op.attrs["axis"]),
    "index_add": lambda low, op, a: low.ns.index_add(a[0], a[1], op.attrs["axis"], a[2]),
    "take_along_axis": lambda low, op, a: low.ns.take_along_axis(a[0], a[1], op.attrs["axis"]),
    "put_along_axis": lambda low, op, a: low.ns.put_along_axis(
        a[0], a[1], a[2], op.attrs["axis"], reduce=op.attrs["reduce"]
    ),
    "scatter": lambda low, op, a: low.ns.scatter(a[0], a[1], a[2], overwrite=op.attrs["overwrite"]),
    # out of place: the op itself (x, value, starts, ends, steps, axes, decrease_axes, none_axes)
    "set_value_with_tensor": lambda low, op, a: low.ns._C_ops.set_value_with_tensor(
        a[0], a[1], *_slice_attrs(op), [], []
    ),
    # in place: what `x[a:b] = v` makes in a static program (`paddle.static.setitem`)
    "set_value_with_tensor_": lambda low, op, a: low.ns.static.setitem(a[0], _index_of(op), a[1]),
}


# every in-place op lowered as its out-of-place base: tells Paddle's in-place handling from our lowering
OUT_OF_PLACE: dict[str, Lower] = {
    **TABLE,
    **{n: TABLE[base] for n in TABLE if n in OPS and (base := OPS[n].autodiff.base) is not None and base in TABLE},
}


class _PaddleLowering(Lowering):
    # the no-grad set goes to `grad(no_grad_vars=...)`, as a Paddle user passes it
    def stop(self, x: Any) -> Any:
        x.stop_gradient = True
        return x


def _condense(e: BaseException) -> str:
    """Paddle's multi-line error text, down to its error lines and the op that raised."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    keep = [ln for ln in lines if re.search(r"Error|\[operator|Exception", ln)] or lines[:1]
    return f"{type(e).__name__}: {' | '.join(dict.fromkeys(keep))[:600]}"


class PaddleForwardError(RuntimeError):
    """The lowered forward program alone fails in Paddle's executor (not a backward finding)."""


class PaddleRunError(RuntimeError):
    """The program with its backward fails in Paddle's executor; the forward alone runs."""


@dataclass
class _Built:
    """One case lowered: the programs, what to feed, and the values to fetch."""

    main: Any
    startup: Any  # None unless parameters need initialising (append_backward)
    feed: dict[str, np.ndarray]
    forward: list[Any]  # the program's outputs (at second order: the first-order gradients)
    grads: list[Any] = field(default_factory=list)  # one per case.wrt, None where Paddle gives none
    ops: list[OpRecord] = field(default_factory=list)
    backward_s: float = 0.0  # seconds in Paddle's grad() / append_backward()

    @property
    def fetch(self) -> list[Any]:
        return self.forward + [g for g in self.grads if g is not None]


class PaddleBackend:
    name = "paddle"
    capabilities = ReferenceBackend.capabilities  # (every one the reference has)

    def __init__(self, listing: bool = True) -> None:
        """`listing`: list the program's ops for the structural invariants (off to time the
        backend alone). Paddle itself is imported at the first case: a process that only asks
        the backend its name and capabilities (certify's pytest, which runs cases in a worker
        process) does not pay its import (about a second)."""
        self.listing = listing
        self.version = framework_version("paddle")
        self.place = "cpu"

    devices = ("cpu", "gpu")

    def use_device(self, device: str) -> None:
        """Run the executor on `CUDAPlace(0)` for "gpu": a GPU build of Paddle with a device."""
        if device == "gpu":
            pd = self.pd
            if not pd.is_compiled_with_cuda():
                raise RuntimeError(f"this Paddle ({self.version}) is a CPU build: install paddlepaddle-gpu")
            if pd.device.cuda.device_count() == 0:
                raise RuntimeError("Paddle finds no CUDA device")
            self.place = "gpu"

    @functools.cached_property
    def pd(self) -> Any:
        os.environ.setdefault("GLOG_minloglevel", "2")  # the executor's info lines, per run
        import paddle

        paddle.enable_static()
        if SERIAL not in os.environ:  # (Paddle read the variable at import)
            paddle.set_flags({SERIAL: True})
        return paddle

    @functools.cached_property
    def exe(self) -> Any:
        return self.pd.static.Executor(self.pd.CUDAPlace(0) if self.place == "gpu" else self.pd.CPUPlace())

    # --- one case ------------------------------------------------------------------------------
    def run(self, case: Case) -> BackendResult:
        if any(not isinstance(v.type, TensorType) for v in case.program.outputs):
            raise Unsupported("the paddle backend lowers tensor outputs only")
        t0 = time.perf_counter()
        built = self._build(case, with_grad=True)
        t1 = time.perf_counter()
        try:
            fetched = self._execute(built)
        except Exception as e:
            self._diagnose(case, e)
        t2 = time.perf_counter()
        n = len(built.forward)
        got = iter(fetched[n:])
        grads = [None if g is None else np.asarray(next(got)) for g in built.grads]
        forward = [np.asarray(y) for y in fetched[:n]]
        violations: list[str] = []
        if case.order == 1 and not _agree(forward, expected := run(case.program, case.inputs).outputs):
            forward, violations = self._forward_alone(case, forward, expected)
        # lowering: our adapter building the forward program through Paddle's static API (and
        # listing the program's ops for the invariants)
        timings = {"lowering": t1 - t0 - built.backward_s, "backward": built.backward_s, "run": t2 - t1}
        return BackendResult(grads, self.version, timings, built.ops, violations, forward)

    def _forward_alone(
        self, case: Case, fetched: list[np.ndarray], expected: list[Any]
    ) -> tuple[list[np.ndarray], list[str]]:
        """The forward outputs fetched beside the gradients differ from the reference
        interpreter's: run the forward program alone a few times. Outputs that vary from run to
        run are Paddle's (measured with its threaded executor); so are outputs fetched beside
        the gradients that differ from the forward program's own, outputs that are right once
        the executor's inplace pass is off (measured: a zero-trip `while` carrying one value
        twice), and outputs that are right once the in-place ops are lowered out of place
        (measured: an in-place op on a value a `while` carries overwrites the loop's initial
        value). A forward program that is wrong the same way every time, whatever Paddle's
        inplace handling, is left to the lowering oracle: a lowering bug."""
        runs = [self.forward(case) for _ in range(FORWARD_RUNS)]
        alone = runs[0]
        for k in range(len(alone)):
            distinct = {r[k].tobytes() for r in runs}
            if len(distinct) > 1:
                raise PaddleForwardError(
                    f"the forward program's output {k} changes from run to run "
                    f"({len(distinct)} distinct values in {FORWARD_RUNS} runs)"
                )
        wrong = [k for k, (a, e) in enumerate(zip(alone, expected)) if not _agree([a], [e])]
        if wrong:
            k = wrong[0]
            off = float(np.max(np.abs(alone[k] - expected[k])))
            if _agree(self._without_inplace_pass(case), expected):
                raise PaddleForwardError(
                    f"the forward program's output {k} differs by {off:.3g} from the reference interpreter, and "
                    f"agrees once the executor's inplace pass is off ({INPLACE_PASS}): the pass gives a result "
                    "the buffer of a value that is still read"
                )
            if any(OPS[op.name].autodiff.inplace_of is not None for op in case.program.walk()):
                if _agree(self.forward(case, OUT_OF_PLACE), expected):
                    raise PaddleForwardError(
                        f"the forward program's output {k} differs by {off:.3g} from the reference interpreter, "
                        "and agrees once its in-place ops are out of place: an in-place op changes a value "
                        "other than its operand"
                    )
        return alone, [
            f"forward output {k} fetched beside the gradients differs from the forward program's own "
            f"(by {float(np.max(np.abs(a - b))):.3g})"
            for k, (a, b) in enumerate(zip(fetched, alone))
            if not _agree([a], [b])
        ]

    def _without_inplace_pass(self, case: Case) -> list[np.ndarray]:
        """The forward program's outputs with the executor's inplace pass off (for this run)."""
        was = self.pd.get_flags([INPLACE_PASS])[INPLACE_PASS]
        self.pd.set_flags({INPLACE_PASS: False})
        try:
            return self.forward(case)
        finally:
            self.pd.set_flags({INPLACE_PASS: was})

    def forward(self, case: Case, table: dict[str, Lower] = TABLE) -> list[np.ndarray]:
        """The lowered forward program's outputs, run without any backward."""
        return [np.asarray(y) for y in self._execute(self._build(case, with_grad=False, table=table))]

    def _build(self, case: Case, with_grad: bool, table: dict[str, Lower] = TABLE) -> _Built:
        pd = self.pd
        from paddle.autograd.ir_backward import append_backward, grad

        main, startup = pd.static.Program(), pd.static.Program()
        feed: dict[str, np.ndarray] = {}
        params = case.area == "append_backward"
        with pd.static.program_guard(main, startup):
            low = _PaddleLowering("paddle", table, pd)
            xs = []
            for k, (v, x) in enumerate(zip(case.program.inputs, case.inputs)):
                t = v.type
                assert isinstance(t, TensorType)
                if params and is_differentiable(t) and not v.stop_gradient:
                    d = pd.static.create_parameter(
                        list(t.shape),
                        DTYPE_NAMES[t.dtype],
                        name=f"x{k}",
                        default_initializer=pd.nn.initializer.Assign(np.asarray(x)),
                    )
                else:
                    d = pd.static.data(f"x{k}", list(t.shape), DTYPE_NAMES[t.dtype])
                    feed[f"x{k}"] = np.asarray(x)
                d.stop_gradient = bool(v.stop_gradient) or not is_differentiable(t)
                xs.append(d)
            low.run_block(case.program.block, xs)
            outs = [low.env[v] for v in case.output_values]
            built = _Built(main, startup if params else None, feed, [low.env[v] for v in case.program.outputs])
            if with_grad:
                t0 = time.perf_counter()
                wrt = [xs[i] for i in case.wrt]
                cots = self._cotangents(case.cotangents, "u", feed)
                cots2 = self._cotangents(case.cotangents2, "w", feed) if case.order == 2 else None
                before = {op.id() for op in _walk(main.global_block())}
                no_grad = [low.env[v] for v in case.no_grad]
                if params:
                    pairs = append_backward(outs[0], no_grad_set=no_grad or None)
                    by_param = {p.name: g for p, g in pairs}
                    built.grads = [by_param.get(f"x{i}") for i in case.wrt]
                else:
                    built.grads = list(grad(outs, wrt, grad_outputs=cots, no_grad_vars=no_grad or None))
                if case.order == 2:
                    built.forward = first = [g for g in built.grads if g is not None]
                    # cotangents2 are one per first-order gradient the reference returns: where
                    # Paddle returns another number, the lowering oracle reports that instead
                    if first and (cots2 is None or len(cots2) == len(first)):
                        built.grads = list(grad(first, wrt, grad_outputs=cots2))
                    else:
                        built.grads = [None] * len(wrt)
                built.backward_s = time.perf_counter() - t0
                if self.listing:
                    built.ops = _listing(main.global_block(), before, {v.id for v in built.fetch})
        return built

    def _cotangents(self, cots: Sequence[np.ndarray] | None, prefix: str, feed: dict[str, np.ndarray]) -> Any:
        if cots is None:
            return None
        out = []
        for k, u in enumerate(cots):
            u = np.asarray(u)
            d = self.pd.static.data(f"{prefix}{k}", list(u.shape), str(u.dtype))
            feed[f"{prefix}{k}"] = u
            out.append(d)
        return out

    def _execute(self, built: _Built) -> list[Any]:
        with self.pd.static.scope_guard(self.pd.static.Scope()):
            if built.startup is not None:
                self.exe.run(built.startup)
            # the executor deletes feed keys the program does not use: give it a copy
            return list(self.exe.run(built.main, feed=dict(built.feed), fetch_list=built.fetch))

    def _diagnose(self, case: Case, e: Exception) -> None:
        """Re-raise a run-time failure as a forward failure or a backward one."""
        try:
            self._execute(self._build(case, with_grad=False))
        except Exception as fwd:
            raise PaddleForwardError(f"the forward program alone fails: {_condense(fwd)}") from None
        raise PaddleRunError(f"the program fails once its backward is added: {_condense(e)}") from None


def _agree(got: Sequence[Any], expected: Sequence[Any]) -> bool:
    """Outputs equal to the reference interpreter's, to the lowering oracle's tolerance (a float32
    output's: both sides round in float32, each its own way)."""
    return len(got) == len(expected) and all(
        np.shape(a) == np.shape(b) and close(np.asarray(a), np.asarray(b), TOLERANCES[_dtype(b)])
        for a, b in zip(got, expected)
    )


def _dtype(x: Any) -> str:
    return "f32" if np.asarray(x).dtype == np.float32 else "f64"


def _walk(block: Any) -> Any:
    for op in block.ops:
        yield op
        for b in op.blocks():
            yield from _walk(b)


def _listing(block: Any, before: set[int], returned: set[Any], depth: int = 0) -> list[OpRecord]:
    out = []
    for op in block.ops:
        subs = [_listing(b, before, returned, depth + 1) for b in op.blocks()]
        name = op.name()
        results = op.results()
        out.append(
            OpRecord(
                name,
                op.id() not in before,
                bool(results) and all(r.use_empty() and r.id not in returned for r in results),
                name in _EFFECTS or any(o.effects for s in subs for o in s),
                name in _ZERO_FILL,
                depth,
            )
        )
        for s in subs:
            out.extend(s)
    return out
