"""The IR: values, operations, blocks and programs (`core`), their types (`types`), building
(`builder`), verifying (`verifier`), and the text format (`lexer`, `parser`, `printer`)."""

from gradcert.reference.ir.core import Attrs, Block, Operation, Program, Value, captures, clone

__all__ = ["Attrs", "Block", "Operation", "Program", "Value", "captures", "clone"]
