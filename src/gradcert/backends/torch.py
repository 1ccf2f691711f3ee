"""The `torch` backend: runs a case eagerly in PyTorch (float64, CPU) and asks its autograd,
`torch.autograd.grad(outputs, inputs, grad_outputs, allow_unused=True)`, for the gradients.

Lowering choices (docs/torch-jax.md says what was measured):

- Every op with an Array-API kernel runs that kernel on `array_api_compat.torch` (PyTorch's own
  functions); `pad` is `torch.nn.functional.pad`.
- Indexing, slice assignment, the softmax family, scans and selections are the framework's own
  functions (docs/ops.md's table); a `scatter` that overwrites writes each row's last update
  only, since the framework leaves the winner of duplicate writes unspecified.
- `if` and `while` are Python control flow on the predicate's value: PyTorch records only the
  path taken, as a user's eager code would.
- In-place ops are PyTorch's real in-place methods (`x.tanh_()`, `x.add_(y)`, ...; `scale_` is
  `mul_` then `add_`). An input the program overwrites in place is cloned first, as a user clones
  a leaf that requires grad before writing it (PyTorch forbids writing the leaf itself). Where
  PyTorch refuses one -- the backward needs a value the op overwrote -- the case is `refused`:
  documented PyTorch behaviour, on file as a known defect with that reason.
- Values cross block boundaries by copy (`clone`), as the IR says, so an in-place op inside a
  branch or loop body never overwrites a value outside it.
- `stop_gradient` values and the no-grad set are `detach()`ed where they are defined.
- Contract mapping: PyTorch returns `None` (with `allow_unused`) for an input with no autograd
  path to any output; that is the contract's `None`. An output that does not require grad has no
  path at all and is left out of the call (PyTorch would refuse it). Second order uses
  `create_graph=True` for the first-order gradients.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gradcert.backends.contract import paths, to_contract
from gradcert.backends.lowering import VECTORS, ArrayApiBackend, Lower, Lowering, kernels, last_wins
from gradcert.backends.protocol import BackendResult, Unsupported
from gradcert.generators.case import Case
from gradcert.reference.ir import Operation, Value
from gradcert.reference.ir.types import TensorType, is_differentiable
from gradcert.reference.ops import OPS
from gradcert.reference.ops.structure import slice_index

TRIP_LIMIT = 10_000


def _if(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    return low.nested(op.blocks[0] if bool(a[0]) else op.blocks[1], [])


def _while(low: Lowering, op: Operation, a: list[Any]) -> list[Any]:
    cond, body = op.blocks
    carry, trips = list(a), 0
    while bool(low.nested(cond, carry)[0]):
        carry, trips = low.nested(body, carry), trips + 1
        if trips > TRIP_LIMIT:
            raise RuntimeError(f"while: more than {TRIP_LIMIT} trips")
    # (a loop that runs no trip returns copies of its operands, as every block boundary does: an
    # in-place op on its result must not write the operand)
    return carry if trips else [low.copy(x) for x in carry]


def _inplace(low: Lowering, op: Operation, a: list[Any]) -> Any:
    d = OPS[op.name]
    assert d.autodiff.inplace_of is not None and d.autodiff.base is not None
    target, rest = a[d.autodiff.inplace_of], a[: d.autodiff.inplace_of] + a[d.autodiff.inplace_of + 1 :]
    return getattr(target, d.autodiff.base + "_")(*rest)


def _pad(low: Lowering, op: Operation, a: list[Any]) -> Any:
    # torch's pad list runs from the last axis backwards: (low_last, high_last, low_prev, ...)
    pad = [n for lo, hi in reversed(list(zip(op.attrs["low"], op.attrs["high"]))) for n in (lo, hi)]
    return low.ns.nn.functional.pad(a[0], pad)


def _reduce(fn: str) -> Lower:
    """A reduction over the op's axes (none: all)."""

    def lower(low: Lowering, op: Operation, a: list[Any]) -> Any:
        axes = tuple(op.attrs["axes"]) or tuple(range(a[0].ndim))
        return getattr(low.ns, fn)(a[0], dim=axes, keepdim=op.attrs["keepdim"])

    return lower


def _prod(low: Lowering, op: Operation, a: list[Any]) -> Any:
    # torch.prod reduces one dim at a time: the reduced dims, last first, kept until the end
    x = a[0]
    for ax in sorted((d % max(x.ndim, 1) for d in op.attrs["axes"] or range(x.ndim)), reverse=True):
        x = low.ns.prod(x, dim=ax, keepdim=True)
    if not op.attrs["keepdim"]:
        x = x.reshape(op.results[0].tensor.shape)
    return x


def _cumsum(low: Lowering, op: Operation, a: list[Any]) -> Any:
    ax = op.attrs["axis"]
    if op.attrs["reverse"]:
        return low.ns.cumsum(a[0].flip(ax), dim=ax).flip(ax)
    return low.ns.cumsum(a[0], dim=ax)


def _slices(op: Operation, ndim: int) -> tuple[slice, ...]:
    return slice_index(ndim, op.attrs["axes"], op.attrs["starts"], op.attrs["ends"])


def _set_value(low: Lowering, op: Operation, a: list[Any]) -> Any:
    out = a[0].clone()
    out[_slices(op, out.ndim)] = a[1]
    return out


def _set_value_(low: Lowering, op: Operation, a: list[Any]) -> Any:
    a[0][_slices(op, a[0].ndim)] = a[1]  # (PyTorch's in-place slice assignment: CopySlices)
    return a[0]


def _scatter(low: Lowering, op: Operation, a: list[Any]) -> Any:
    x, index, updates = a
    if op.attrs["overwrite"]:
        keep = low.ns.tensor(last_wins(index.cpu()), dtype=low.ns.int64, device=index.device)
        return x.index_put((index[keep],), updates[keep], accumulate=False)
    return x.index_fill(0, index, 0.0).index_add(0, index, updates)


TABLE: dict[str, Lower] = {
    "if": _if,
    "while": _while,
    "pad": _pad,
    **VECTORS,
    **{name: _inplace for name, d in OPS.items() if d.autodiff.inplace_of is not None},
    "scale_": lambda low, op, a: a[0].mul_(op.attrs["scale"]).add_(op.attrs["bias"]),
    "erf": lambda low, op, a: low.ns.special.erf(a[0]),
    "gelu": lambda low, op, a: low.ns.nn.functional.gelu(
        a[0], approximate="tanh" if op.attrs["approximate"] else "none"
    ),
    "clip": lambda low, op, a: low.ns.clamp(a[0], op.attrs["min"], op.attrs["max"]),
    "softmax": lambda low, op, a: low.ns.softmax(a[0], dim=op.attrs["axis"]),
    "log_softmax": lambda low, op, a: low.ns.log_softmax(a[0], dim=op.attrs["axis"]),
    "logsumexp": _reduce("logsumexp"),
    "max": _reduce("amax"),
    "min": _reduce("amin"),
    "prod": _prod,
    "cumsum": _cumsum,
    "cumprod": lambda low, op, a: low.ns.cumprod(a[0], dim=op.attrs["axis"]),
    "topk": lambda low, op, a: list(
        low.ns.topk(a[0], op.attrs["k"], dim=op.attrs["axis"], largest=op.attrs["largest"], sorted=True)
    ),
    "p_norm": lambda low, op, a: low.ns.linalg.vector_norm(
        a[0], ord=op.attrs["p"], dim=op.attrs["axis"], keepdim=op.attrs["keepdim"]
    ),
    "gather": lambda low, op, a: low.ns.index_select(a[0], op.attrs["axis"], a[1]),
    "index_select": lambda low, op, a: low.ns.index_select(a[0], op.attrs["axis"], a[1]),
    "index_add": lambda low, op, a: low.ns.index_add(a[0], op.attrs["axis"], a[1], a[2]),
    "take_along_axis": lambda low, op, a: low.ns.take_along_dim(a[0], a[1], dim=op.attrs["axis"]),
    "put_along_axis": lambda low, op, a: (
        low.ns.scatter_add(a[0], op.attrs["axis"], a[1], a[2])
        if op.attrs["reduce"] == "add"
        else low.ns.scatter(a[0], op.attrs["axis"], a[1], a[2])
    ),
    "scatter": _scatter,
    "set_value_with_tensor": _set_value,
    "set_value_with_tensor_": _set_value_,
}


class _TorchLowering(Lowering):
    # a second-order request's no-grad values (`TorchBackend._second_order_no_grad`): recorded as
    # computed (`recorded` a list), or each replaced by the next recorded one (`replay` an iterator)
    watched: frozenset[Value] = frozenset()
    recorded: list[Any] | None = None
    replay: Any = None

    def result(self, v: Value, x: Any) -> Any:
        if v in self.watched:
            if self.replay is not None:
                return next(self.replay).clone()  # (a value of its own: an in-place op may write it too)
            assert self.recorded is not None
            self.recorded.append(x.clone())  # (as computed: an in-place op may write `x` later)
            return x
        return super().result(v, x)

    def stop(self, x: Any) -> Any:
        return x.detach()

    def copy(self, x: Any) -> Any:
        return [t.clone() for t in x] if isinstance(x, (list, tuple)) else x.clone()


def _overwritten_inputs(case: Case) -> set[Value]:
    """The program's inputs that an in-place op overwrites."""
    inputs = set(case.program.inputs)
    out = set()
    for op in case.program.walk():
        k = OPS[op.name].autodiff.inplace_of
        if k is not None and op.operands[k] in inputs:
            out.add(op.operands[k])
    return out


def _refused_inplace(e: RuntimeError) -> bool:
    text = str(e)
    return "in-place operation" in text or "inplace operation" in text


class TorchBackend(ArrayApiBackend):
    name = "torch"
    framework = "torch"
    table = TABLE

    def gpu(self) -> str:
        """CUDA tensors: the inputs, the cotangents and every tensor a kernel makes (torch's
        default device, set for the case)."""
        torch = self.torch
        if not torch.cuda.is_available():
            raise RuntimeError(f"PyTorch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False)")
        return "cuda"

    def placed(self) -> Any:
        return self.torch.device(self.device)

    @functools.cached_property
    def torch(self) -> Any:
        import torch

        return torch

    @functools.cached_property
    def xp(self) -> Any:
        import array_api_compat.torch as xp

        return xp

    def run(self, case: Case) -> BackendResult:
        try:
            return super().run(case)
        except RuntimeError as e:
            if _refused_inplace(e):
                raise Unsupported(f"PyTorch refuses an in-place op: {' '.join(str(e).split())[:300]}") from None
            raise

    def leaves(self, case: Case) -> list[Any]:
        """The case's inputs as tensors; as a user would, only the inputs differentiated with
        respect to require grad."""
        wanted, out = set(case.wrt), []
        for i, (v, x) in enumerate(zip(case.program.inputs, case.inputs)):
            t = v.type
            assert isinstance(t, TensorType)
            leaf = self.torch.from_numpy(np.array(x)).to(self.device)
            leaf.requires_grad_(i in wanted and is_differentiable(t) and not v.stop_gradient)
            out.append(leaf)
        return out

    def lower(
        self, case: Case, leaves: Sequence[Any], recorded: list[Any] | None = None, replay: Any = None
    ) -> dict[Value, Any]:
        """Run the program eagerly on `leaves` (one tensor per input): every top-level value. The
        no-grad set is stopped where its values are defined, or, with `recorded` or `replay`, its
        values are recorded or replaced (`_second_order_no_grad`)."""
        watching = recorded is not None or replay is not None
        blocked = () if watching else case.no_grad
        low = _TorchLowering("torch", self.table, self.torch, kernels(self.xp), blocked)
        if watching:
            low.watched, low.recorded, low.replay = frozenset(case.no_grad), recorded, replay
        overwritten = _overwritten_inputs(case)
        for v, leaf in zip(case.program.inputs, leaves):
            # (PyTorch forbids writing a leaf that requires grad in place; a user clones it first,
            # and the gradient flows through the clone to the leaf)
            low.env[v] = low.result(v, leaf.clone() if v in overwritten and leaf.requires_grad else leaf)
        low.run_block(case.program.block)
        return low.env

    def _second_order_no_grad(self, case: Case) -> tuple[list[Any], list[Any], list[Any]]:
        """A second-order request with a no-grad set. The set belongs to the first backward only:
        the first derivative g(x) = d1 F(x, b(x)) holds the set's values b fixed, but still reads
        them, and they depend on x, so the second derivative follows them (Paddle's and the
        reference's contract). PyTorch has no per-call no-grad set, and a `detach()` would stop
        every order. So the program runs twice: from a twin x' of the inputs, recording the set's
        values as computed (every instance, in order: a loop's too); then from x, each of them
        replaced by its recorded twin. Differentiating in x alone gives g; differentiating g in x
        and in x' and adding (x' = x) gives the second derivative. Returns the first-order
        gradients (as `_grad` maps them), the inputs x and their twins."""
        leaves = self.leaves(case)
        twins = [t.detach().clone().requires_grad_(t.requires_grad) for t in leaves]
        recorded: list[Any] = []
        self.lower(case, twins, recorded=recorded)
        env = self.lower(case, leaves, replay=iter(recorded))
        wrt = [leaves[i] for i in case.wrt]
        ys = [env[v] for v in case.output_values]
        return self._grad(ys, wrt, case.cotangents, case, 1, create_graph=True), wrt, [twins[i] for i in case.wrt]

    def _run(self, case: Case) -> BackendResult:
        t0 = time.perf_counter()
        twins: list[Any] = []
        if case.order == 2 and case.no_grad:
            grads, wrt, twins = self._second_order_no_grad(case)
            forward = []
        else:
            leaves = self.leaves(case)
            env = self.lower(case, leaves)
            wrt = [leaves[i] for i in case.wrt]
            ys = [env[v] for v in case.output_values]
            grads = self._grad(ys, wrt, case.cotangents, case, 1, create_graph=case.order == 2)
            forward = [env[v] for v in case.program.outputs]
        if case.order == 2:
            # the "forward" of a second-order case is its first-order gradients (those not None)
            forward = [g for g in grads if g is not None]
            cots2 = case.cotangents2
            if cots2 is not None and len(cots2) != len(forward):
                grads = [None] * len(wrt)  # the lowering oracle reports the count
            else:
                grads = self._grad(forward, wrt, cots2, case, 2, retain_graph=bool(twins))
                if twins:  # the paths through the no-grad set's values (above)
                    more = self._grad(forward, twins, cots2, case, 2)
                    grads = [a if b is None else b if a is None else a + b for a, b in zip(grads, more)]
        t1 = time.perf_counter()
        return BackendResult(
            [None if g is None else g.detach().numpy(force=True) for g in grads],
            self.version,
            {"backend": t1 - t0},
            forward=[y.detach().numpy(force=True) for y in forward],
        )

    def _grad(
        self,
        ys: Sequence[Any],
        xs: Sequence[Any],
        cots: Sequence[np.ndarray] | None,
        case: Case,
        order: int,
        create_graph: bool = False,
        retain_graph: bool = False,
    ) -> list[Any]:
        """Gradients of sum <u_k, y_k> w.r.t. `xs`, mapped onto the contract's `None`."""
        torch = self.torch
        us = (
            [torch.ones_like(y) for y in ys]
            if cots is None
            else [torch.from_numpy(np.array(u)).to(self.device) for u in cots]
        )
        # (PyTorch's own check of every cotangent against its output, run on the outputs left out
        # below too: a cotangent of the wrong shape is refused as `autograd.grad` refuses it)
        torch.autograd._make_grads(list(ys), list(us), is_grads_batched=False)
        pairs = [(y, u) for y, u in zip(ys, us) if y.requires_grad]
        wanted = [x for x in xs if x.requires_grad]
        got: list[Any] = [None] * len(xs)
        if pairs and wanted:
            it = iter(
                torch.autograd.grad(
                    [y for y, _ in pairs],
                    wanted,
                    [u for _, u in pairs],
                    allow_unused=True,
                    create_graph=create_graph,
                    retain_graph=create_graph or retain_graph,
                )
            )
            got = [next(it) if x.requires_grad else None for x in xs]
        return to_contract(
            got,
            paths(case, order),
            lambda k: torch.zeros_like(xs[k]),
            lambda g: not bool(torch.any(g != 0)),
        )
