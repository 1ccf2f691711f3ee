"""The text format's tokens: values (`%x`), block labels (`^body`), numbers, identifiers and
punctuation; `#` comments and whitespace are skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass


class ParseError(Exception):
    """A syntax error, naming the line and column."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(f"{line}:{col}: {message}")
        self.message, self.line, self.col = message, line, col


_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+|\#[^\n]*)
      | (?P<value>%[A-Za-z0-9_.]+)
      | (?P<label>\^[A-Za-z_][A-Za-z0-9_]*)
      | (?P<number>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+|inf|nan)(?![A-Za-z0-9_]))
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<punct>[(){}\[\]<>,:=])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    line: int
    col: int


def tokenize(src: str) -> list[Token]:
    toks, pos, line, start = [], 0, 1, 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None:
            raise ParseError(f"unexpected character {src[pos]!r}", line, pos - start + 1)
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append(Token(kind, m.group(), line, pos - start + 1))
        for i, ch in enumerate(m.group()):
            if ch == "\n":
                line, start = line + 1, pos + i + 1
        pos = m.end()
    toks.append(Token("eof", "", line, pos - start + 1))
    return toks
