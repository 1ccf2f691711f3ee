"""A program's float precision, and its float64 twin.

A float32 program is judged against its twin: the same ops on the same inputs, every float32
value made float64 (a `cast` to float32 becomes one to float64, a no-op). The twin's gradients are
the float32 program's exact ones up to float64 rounding, so finite differences and the expected
gradients keep float64's accuracy, and only the backend's float32 rounding is left to the
tolerances (`backends.protocol.TOLERANCES`).
"""

from __future__ import annotations

from gradcert.reference.ir import Attrs, Program, Value, clone
from gradcert.reference.ir.types import StackType, TensorType, Type, VectorType


def _wide(t: Type) -> Type:
    if isinstance(t, TensorType):
        return TensorType(t.shape, "f64") if t.dtype == "f32" else t
    if isinstance(t, VectorType):
        return VectorType(tuple(_wide(e) for e in t.elems))  # type: ignore[misc]
    return StackType(tuple(_wide(e) for e in t.elems))


def _wide_attrs(attrs: Attrs) -> Attrs:
    return {k: "f64" if k == "dtype" and v == "f32" else v for k, v in attrs.items()}


def precision(program: Program) -> str:
    """ "f32" where any value of the program holds a float32 tensor (its twin's type differs), else "f64"."""
    values: list[Value] = list(program.inputs)
    for op in program.walk():
        values += op.results
        for b in op.blocks:
            values += b.args
    return "f32" if any(_wide(v.type) != v.type for v in values) else "f64"


def widen(program: Program) -> tuple[Program, dict[Value, Value]]:
    """The float64 twin of `program`, and the map from its values to the twin's."""
    return clone(program, _wide, _wide_attrs)
