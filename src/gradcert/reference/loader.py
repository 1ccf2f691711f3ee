"""Reading program files: parse, then verify, with errors as one line `path:line:col: message`."""

from __future__ import annotations

from pathlib import Path

from .ir import Program
from .text import ParseError, parse_program
from .verifier import VerifyError, verify


class ProgramFileError(Exception):
    """A program file that is missing, malformed or ill-typed; str() is one line naming the place."""


def load_program(path: str | Path) -> Program:
    p = Path(path)
    try:
        src = p.read_text()
    except FileNotFoundError:
        raise ProgramFileError(f"{p}: no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise ProgramFileError(f"{p}: cannot read: {e}") from None
    return parse_source(src, str(p))


def parse_source(src: str, name: str = "<text>") -> Program:
    try:
        program = parse_program(src)
        verify(program, src)
    except ParseError as e:
        raise ProgramFileError(f"{name}:{e.line}:{e.col}: {e.message}") from None
    except VerifyError as e:
        raise ProgramFileError(f"{name}:{e.line}:{e.col}: {e.kind}: {e.message}") from None
    return program
