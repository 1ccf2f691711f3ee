"""The op set: one declarative definition per op (see `base.OpDef`), grouped by family."""

from gradcert.reference.ops import along, control, elementwise, indexing, stack, structure, vector  # noqa: F401  (registers the ops)
from gradcert.reference.ops.base import INPLACE, OPS, OpDef, TypeRuleError, lookup
from gradcert.reference.ops.stack import DECLARED

__all__ = ["DECLARED", "INPLACE", "OPS", "OpDef", "TypeRuleError", "lookup"]
