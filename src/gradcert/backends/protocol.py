"""What a backend implements and returns: the `Backend` protocol, its `BackendResult`, the
exceptions by which it declines a case, the capabilities it may declare, and the tolerance by
which an adapter compares two answers the way the oracles do.

This module is the whole of what a backend, built in or third party, needs to know of gradcert
beyond the IR and the `Case` it is handed; the judge (`gradcert.conformance`) sits above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # (annotations only: certify's own process and the report import no NumPy)
    import numpy as np

    from gradcert.generators.case import Case

# The capabilities a backend may declare (`Backend.capabilities`): a certification area whose cases
# need one the backend lacks records them `unsupported`; a backend that declares one and raises
# `Unsupported` for such a case is `refused` (a failure).
CAPABILITIES = {
    "if": "`if` ops (a branch taken at run time)",
    "while": "`while` ops (a loop of run-time trip count)",
    "nesting": "control flow inside control flow",
    "inplace": "in-place ops (`tanh_`, `add_`, ...)",
    "combine_split": "vector values (`combine`, `split`, and the ops on tuples)",
    "double_grad": "second-order gradients (the gradient of a gradient)",
    "backward_program": "`BackendResult.backward_ops` given, for the structural invariants",
    "append_backward": "the parameter-list API: one loss, every input a parameter",
    "indexing": "gathers and scatters by `i64` indices (duplicates included), slice assignment",
    "along_axis": "the softmax family, scans and selections along an axis (`max`, `topk`, `p_norm`, ...)",
    "float32": "float32 programs, and casts to and from float64",
}


class Unsupported(Exception):
    """Raised by a backend for a case it cannot express: `unsupported` where the case needs a
    capability the backend does not declare, `refused` (a failure) where it declares it."""


class AdapterLimit(Unsupported):
    """Raised by an adapter for a case it cannot lower into its framework faithfully (a request the
    framework's API has no way to say): a limit of the adapter, stated in the message. Its
    verdict is `unsupported` whatever the capabilities, counted and reported as the adapter's
    limit, never a defect of the framework's."""


@dataclass
class OpRecord:
    """One op of a backend's backward program, normalised for the structural invariants."""

    name: str
    added: bool  # made by the backward (not part of the forward)
    unused: bool  # no result of it is used, fetched or returned
    effects: bool = False  # side effects keep it alive (stack pushes and pops)
    zero_fill: bool = False  # a zero-fill op (`full_like`, `full` of zeros)
    depth: int = 0


@dataclass
class BackendResult:
    grads: list[np.ndarray | None]  # one per case.wrt, host arrays of the inputs' dtypes, None where none is returned
    version: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    backward_ops: list[OpRecord] | None = None  # where the backend exposes its backward program
    violations: list[str] = field(default_factory=list)  # invariants the adapter checked itself
    forward: list[np.ndarray] | None = None  # the backend's forward outputs, for the lowering check


@runtime_checkable
class Backend(Protocol):
    name: str
    capabilities: frozenset[str]  # names from CAPABILITIES
    version: str

    def run(self, case: Case) -> BackendResult: ...


REF_RTOL, REF_ATOL = 1e-9, 1e-10
FD_RTOL, FD_ATOL = 1e-6, 1e-8
# float32 cases (`Case.dtype`): the expected gradients and finite differences come from the
# case's float64 twin (`Case.widened`), so only the backend's own float32 rounding is measured,
# against both oracles alike. See `conformance/oracles.py` and docs/oracles.md for the measurements.
F32_RTOL, F32_ATOL = 1e-4, 1e-4


@dataclass(frozen=True)
class Tolerance:
    ref_rtol: float
    ref_atol: float
    fd_rtol: float
    fd_atol: float
    # forward values compared relative to their tensor's largest element, not element by element:
    # float32 rounding of a sum (a matmul's) is relative to its terms, and an element that cancels
    # to near zero keeps the absolute error of the large ones (float64's is far below either way)
    normwise: bool = False


TOLERANCES = {
    "f64": Tolerance(REF_RTOL, REF_ATOL, FD_RTOL, FD_ATOL),
    "f32": Tolerance(F32_RTOL, F32_ATOL, F32_RTOL, F32_ATOL, normwise=True),
}


def close(y: np.ndarray, r: np.ndarray, tol: Tolerance) -> bool:
    """`y` equals `r` to the reference oracle's tolerance `tol`: np.allclose(y, r, tol.ref_rtol,
    tol.ref_atol, equal_nan=True), without its Python overhead; relative to the largest element for
    float32 (`Tolerance.normwise`)."""
    import numpy as np  # (here: the protocol's importers need no NumPy until they compare)

    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.abs(r) if not tol.normwise else float(np.max(np.abs(r), initial=0.0, where=np.isfinite(r)))
        ok = np.abs(y - r) <= tol.ref_atol + tol.ref_rtol * scale
        finite = np.isfinite(y) & np.isfinite(r)
        if ok.all() and finite.all():
            return True
        # non-finite entries: equal infinities, or NaN on both sides
        same = (y == r) | (np.isnan(y) & np.isnan(r))
        return bool(np.all(np.where(finite, ok, same)))
