"""Reading program files: parse, then verify, with errors as one line `path:line:col: message`."""

from __future__ import annotations

from pathlib import Path

from gradcert.reference.ir import Program
from gradcert.reference.ir.lexer import ParseError
from gradcert.reference.ir.parser import parse_program
from gradcert.reference.ir.verifier import VerifyError, verify


class ProgramFileError(Exception):
    """A program file that is missing, malformed or ill-typed; str() is one line naming the place."""


def read_source(path: str | Path, error: type[Exception] = ProgramFileError) -> str:
    """The text of a file, or `error` with one line: missing, or unreadable and why."""
    p = Path(path)
    try:
        return p.read_text()
    except FileNotFoundError:
        raise error(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{p}: cannot read: {e}") from None


def load_program(path: str | Path) -> Program:
    return parse_source(read_source(path), str(path))


def parse_source(src: str, name: str = "<text>") -> Program:
    try:
        program = parse_program(src)
        verify(program, src)
    except ParseError as e:
        raise ProgramFileError(f"{name}:{e.line}:{e.col}: {e.message}") from None
    except VerifyError as e:
        raise ProgramFileError(f"{name}:{e.line}:{e.col}: {e.kind}: {e.message}") from None
    return program
