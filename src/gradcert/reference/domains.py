"""Safe input values for a program: each input drawn inside the domains of the ops that read it."""

from __future__ import annotations

import numpy as np

from gradcert.reference.ir import Program, Value
from gradcert.reference.ir.types import TensorType
from gradcert.reference.ops import OPS

DEFAULT = (-1.0, 1.0)


def input_range(program: Program, v: Value) -> tuple[float, float]:
    """The intersection of the safe ranges of every operand position that reads `v` directly."""
    lo, hi = DEFAULT
    narrowed = False
    for op in program.walk():
        d = OPS[op.name]
        for i, x in enumerate(op.operands):
            if x is v and i < len(d.drawing.domain) and d.drawing.domain[i] is not None:
                a, b = d.drawing.domain[i]  # type: ignore[misc]
                lo, hi = (max(lo, a), min(hi, b)) if narrowed else (a, b)
                narrowed = True
    if lo >= hi:
        raise ValueError(f"input %{v.name} has no value safe for every op reading it")
    return lo, hi


def safe_inputs(program: Program, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for v in program.inputs:
        t = v.type
        assert isinstance(t, TensorType)
        if t.dtype == "bool":
            out.append(rng.integers(0, 2, t.shape).astype(bool))
        elif t.dtype == "i64":
            out.append(rng.integers(0, 4, t.shape).astype(np.int64))
        else:
            lo, hi = input_range(program, v)
            out.append(rng.uniform(lo, hi, t.shape).astype(np.float64 if t.dtype == "f64" else np.float32))
    return out
