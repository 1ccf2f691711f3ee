"""Second-order cases: a first-order case plus cotangents for its first-order gradients."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..reference.gradients import FirstOrder, first_order
from .case import Case
from .choices import Chooser


def second_order(case: Case, ch: Chooser) -> Case:
    """`case` asked for the gradient of sum <u2, g(x)>, g its (reference) first-order gradients.
    The first-order program (made here for the gradients' shapes) goes with the case: finite
    differences differentiate it (`Case.first_order`)."""
    q, feeds = first_order(case.program, case.output_values, case.wrt_values, case.cotangents, case.no_grad)
    u2 = [
        np.asarray(ch.uniform(-1.0, 1.0, v.type.shape), dtype=np.float32 if v.type.dtype == "f32" else np.float64)  # type: ignore[union-attr]
        for v in q.outputs
    ]
    made = FirstOrder(q, feeds, (case.program, case.outputs, case.wrt, case.cotangents, case.no_grad))
    return replace(case, order=2, cotangents2=u2, first_order=made)
