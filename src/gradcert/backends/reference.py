"""The built-in `reference` backend: gradcert's own backward, run on the reference interpreter."""

from __future__ import annotations

import time
import weakref
from typing import Any

import numpy as np

from gradcert import __version__
from gradcert.backends.protocol import BackendResult
from gradcert.generators.case import Case
from gradcert.reference.autodiff.gradients import compute, first_order
from gradcert.reference.autodiff.invariants import violations
from gradcert.reference.interpreter import namespace
from gradcert.reference.ir import Program


class ReferenceBackend:
    """gradcert's own backward, run on the reference interpreter."""

    name = "reference"
    capabilities = frozenset(
        {
            "if",
            "while",
            "nesting",
            "inplace",
            "combine_split",
            "double_grad",
            "backward_program",
            "append_backward",
            "indexing",
            "along_axis",
            "float32",
        }
    )
    version = __version__
    devices = ("cpu", "gpu")  # NumPy, CuPy

    def __init__(self, listing: bool = True, xp: Any = np) -> None:
        """`listing`: check its backward program's invariants (off where the reference only
        supplies the expected gradients for judging another backend). It checks them on the
        program itself (`violations`, each naming its line), so it lists no ops for the invariants
        oracle to check again (`BackendResult.backward_ops`: for a backend that only exposes them).
        The transform is deterministic: the same request on the same program makes the same
        backward program, whatever the cotangents' values, so its invariants are checked once for
        a run of such requests (a linearity check makes three)."""
        self.listing, self.xp = listing, xp
        # (the program, by a weak reference: a strong one kept each case's programs alive into the
        # next case, past the collection that frees them young: judging.draw_and_check; the rest of
        # the request; its violations)
        self._checked: tuple[weakref.ref[Program], tuple[object, ...], list[str]] | None = None

    def use_device(self, device: str) -> None:
        """Run the interpreter on `device`'s array namespace (`interpreter.namespace`)."""
        self.xp = namespace(device)

    def run(self, case: Case) -> BackendResult:
        t0 = time.perf_counter()
        program, inputs, outputs, wrt, cots = (
            case.program,
            list(case.inputs),
            case.output_values,
            case.wrt_values,
            case.cotangents,
        )
        if case.order == 2:
            # (a BackwardError is the reference's own failure, or a bad request: an error, never
            # `unsupported`)
            program, extra = first_order(case.program, outputs, wrt, cots, case.no_grad)
            inputs += extra
            wrt = [program.inputs[i] for i in case.wrt]
            outputs, cots = program.outputs, case.cotangents2
        known: list[str] | None = None  # the violations of this request, checked before
        if self.listing:  # (the request is only wanted to tell whether its invariants were checked)
            request = (
                case.order,
                tuple(case.outputs),
                tuple(case.wrt),
                tuple(map(id, case.no_grad)),  # (the program's values, by id: not kept alive past the case)
                case.cotangents is None,
                case.cotangents2 is None,
            )
            if self._checked is not None and self._checked[0]() is case.program and self._checked[1] == request:
                known = self._checked[2]
        check = self.listing and known is None
        c = compute(
            program, inputs, outputs, wrt, cots, case.no_grad if case.order == 1 else [], xp=self.xp, checked=check
        )
        t1 = time.perf_counter()
        grads = [None if x is None else np.asarray(x) for x in c.grads]  # (in the inputs' dtypes)
        ys = [np.asarray(y) for y in c.outputs]
        timings = {"backward and run": t1 - t0}
        found = known or []
        if check:
            assert c.before is not None
            found = violations(c.transformed, c.before)
            self._checked = (weakref.ref(case.program), request, found)
            timings["invariants"] = time.perf_counter() - t1
        return BackendResult(grads, self.version, timings, None, found, ys)
