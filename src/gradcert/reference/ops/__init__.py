"""The op set: one declarative definition per op (see `base.OpDef`), grouped by family."""

from . import along, control, elementwise, indexing, stack, structure, vector  # noqa: F401  (registers the ops)
from .base import INPLACE, OPS, OpDef, TypeRuleError, lookup
from .stack import DECLARED

__all__ = ["DECLARED", "INPLACE", "OPS", "OpDef", "TypeRuleError", "lookup"]
