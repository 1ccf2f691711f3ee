"""The reference: the IR (`ir/`), the op set (`ops/`), the interpreter and the reference backward
(`autodiff/`).

The names below are imported when first asked for: a process that only reads results or renders
a report (certify's own, the report's) imports no NumPy and no IR through this package."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gradcert.reference.interpreter import Interpreter, InterpreterError, run
    from gradcert.reference.ir import Block, Operation, Program, Value
    from gradcert.reference.ir.builder import Builder, ProgramBuilder
    from gradcert.reference.ir.lexer import ParseError
    from gradcert.reference.ir.parser import parse_program
    from gradcert.reference.ir.printer import print_program
    from gradcert.reference.ir.types import StackType, TensorType, VectorType, boolean, f64, i64
    from gradcert.reference.ir.verifier import VerifyError, verify
    from gradcert.reference.ops import OPS, OpDef

_WHERE = {
    "Builder": "ir.builder",
    "ProgramBuilder": "ir.builder",
    "Interpreter": "interpreter",
    "InterpreterError": "interpreter",
    "run": "interpreter",
    "Block": "ir",
    "Operation": "ir",
    "Program": "ir",
    "Value": "ir",
    "OPS": "ops",
    "OpDef": "ops",
    "ParseError": "ir.lexer",
    "parse_program": "ir.parser",
    "print_program": "ir.printer",
    "StackType": "ir.types",
    "TensorType": "ir.types",
    "VectorType": "ir.types",
    "boolean": "ir.types",
    "f64": "ir.types",
    "i64": "ir.types",
    "VerifyError": "ir.verifier",
    "verify": "ir.verifier",
}

__all__ = [
    "Block",
    "Builder",
    "Interpreter",
    "InterpreterError",
    "OPS",
    "OpDef",
    "Operation",
    "ParseError",
    "Program",
    "ProgramBuilder",
    "StackType",
    "TensorType",
    "Value",
    "VectorType",
    "VerifyError",
    "boolean",
    "f64",
    "i64",
    "parse_program",
    "print_program",
    "run",
    "verify",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
