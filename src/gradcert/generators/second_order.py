"""Second-order cases: a first-order case plus cotangents for its first-order gradients."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gradcert.generators.case import Case
from gradcert.generators.choices import Chooser
from gradcert.reference.autodiff.gradients import FirstOrder, first_order
from gradcert.reference.ir.types import xp_dtype


def second_order(case: Case, ch: Chooser) -> Case:
    """`case` asked for the gradient of sum <u2, g(x)>, g its (reference) first-order gradients.
    The first-order program (made here for the gradients' shapes) goes with the case: finite
    differences differentiate it (`Case.first_order`)."""
    q, feeds = first_order(case.program, case.output_values, case.wrt_values, case.cotangents, case.no_grad)
    u2 = [np.asarray(ch.uniform(-1.0, 1.0, v.type.shape), dtype=xp_dtype(np, v.type.dtype)) for v in q.outputs]  # type: ignore[union-attr]
    made = FirstOrder(q, feeds, (case.program, case.outputs, case.wrt, case.cotangents, case.no_grad))
    return replace(case, order=2, cotangents2=u2, first_order=made)
