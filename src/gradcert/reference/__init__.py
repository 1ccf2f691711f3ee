"""The reference: IR, text format, verifier, op set, interpreter and reference backward."""

from .builder import Builder, ProgramBuilder
from .interpreter import Interpreter, InterpreterError, run
from .ir import Block, Operation, Program, Value
from .ops import OPS, OpDef
from .text import ParseError, parse_program, print_program
from .types import StackType, TensorType, VectorType, boolean, f64, i64
from .verifier import VerifyError, verify

__all__ = [
    "OPS",
    "Block",
    "Builder",
    "Interpreter",
    "InterpreterError",
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
