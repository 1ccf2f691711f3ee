"""The reference: IR, text format, verifier, op set, interpreter and reference backward."""

from gradcert.reference.interpreter import Interpreter, InterpreterError, run
from gradcert.reference.ir import Block, Operation, Program, Value
from gradcert.reference.ir.builder import Builder, ProgramBuilder
from gradcert.reference.ir.lexer import ParseError
from gradcert.reference.ir.parser import parse_program
from gradcert.reference.ir.printer import print_program
from gradcert.reference.ir.types import StackType, TensorType, VectorType, boolean, f64, i64
from gradcert.reference.ir.verifier import VerifyError, verify
from gradcert.reference.ops import OPS, OpDef

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
