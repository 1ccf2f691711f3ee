"""The text format: the one way programs are shown, stored and diffed.

    program(%x: f64[3], %w: f64[3] stop_gradient) {
      %0 = multiply(%x, %w) : f64[3]
      %1 = sum(%0) {axes=[], keepdim=false} : f64[]
      return %1
    }

Values print under their own names, or as `%N` numbered in definition order; attributes print
sorted by key; nested blocks print under `^label(args):`. Printing is deterministic and
`print_program(parse_program(print_program(p))) == print_program(p)`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from .builder import normalize_attrs
from .ir import Block, Operation, Program, Value
from .ops import TypeRuleError, lookup
from .types import DTYPES, StackType, TensorType, Type, VectorType

_T = TypeVar("_T")


class ParseError(Exception):
    """A syntax error, naming the line and column."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(f"{line}:{col}: {message}")
        self.message, self.line, self.col = message, line, col


# --- printing ------------------------------------------------------------------------------------


def _literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    return str(v)


class Namer:
    def __init__(self, program: Program) -> None:
        taken: set[str] = set()
        self.names: dict[Value, str] = {}
        values = list(_all_values(program))
        for v in values:
            if v.name and v.name not in taken and _NAME.fullmatch(v.name):
                self.names[v] = v.name
                taken.add(v.name)
        n = 0
        for v in values:
            if v not in self.names:
                while str(n) in taken:
                    n += 1
                self.names[v] = str(n)
                taken.add(str(n))
        self.pct = {v: "%" + n for v, n in self.names.items()}

    def __call__(self, v: Value) -> str:
        return self.pct.get(v, "%<undefined>")


_NAME = re.compile(r"[A-Za-z0-9_.]+")


def _all_values(program: Program) -> Iterator[Value]:
    def block(b: Block) -> Iterator[Value]:
        yield from b.args
        for op in b.ops:
            for sub in op.blocks:
                yield from block(sub)
            yield from op.results

    return block(program.block)


@functools.lru_cache(maxsize=1024)
def _type_text(t: Type) -> str:
    return str(t)  # a program has few distinct types: each is formatted once


def _typed(v: Value) -> str:
    text = _type_text(v.type)
    return text + " stop_gradient" if v.stop_gradient else text


def print_program(
    program: Program, lines: dict[Operation, int] | None = None, origins: bool = False, namer: Namer | None = None
) -> str:
    """The program's text. With `lines`, records each op's line number; with `origins`, each
    backward op is annotated with the forward op it came from (an annotation the parser skips).
    `namer`: the program's Namer, where the caller has made it already."""
    name = namer or Namer(program)
    out: list[str] = []

    def emit_block(b: Block, depth: int) -> None:
        pad = "  " * depth
        for op in b.ops:
            if lines is not None:
                lines[op] = len(out) + 1
            text = op.name + "(" + ", ".join([name(v) for v in op.operands]) + ")"
            if op.attrs:
                text += " {" + ", ".join([f"{k}={_literal(op.attrs[k])}" for k in sorted(op.attrs)]) + "}"
            if op.results:
                head = ", ".join([name(r) for r in op.results])
                text = f"{head} = {text} : {', '.join([_typed(r) for r in op.results])}"
            if op.blocks:
                text += " {"
            if origins and op.origin is not None:
                src = op.origin.results[0] if op.origin.results else None
                text += f"  # from {op.origin.name}" + (f" {name(src)}" if src is not None else "")
            out.append(pad + text)
            for sub in op.blocks:
                args = ", ".join(f"{name(a)}: {_typed(a)}" for a in sub.args)
                out.append(f"{pad}^{sub.label}" + (f"({args})" if sub.args else "") + ":")
                emit_block(sub, depth + 1)
            if op.blocks:
                out.append(pad + "}")

    params = ", ".join(f"{name(a)}: {_typed(a)}" for a in program.inputs)
    out.append(f"program({params}) {{")
    emit_block(program.block, 1)
    out.append("  return " + ", ".join(name(v) for v in program.outputs))
    out.append("}")
    return "\n".join(out) + "\n"


# --- parsing -------------------------------------------------------------------------------------

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
class _Tok:
    kind: str
    text: str
    line: int
    col: int


def _tokenize(src: str) -> list[_Tok]:
    toks, pos, line, start = [], 0, 1, 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None:
            raise ParseError(f"unexpected character {src[pos]!r}", line, pos - start + 1)
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), line, pos - start + 1))
        for i, ch in enumerate(m.group()):
            if ch == "\n":
                line, start = line + 1, pos + i + 1
        pos = m.end()
    toks.append(_Tok("eof", "", line, pos - start + 1))
    return toks


class _Parser:
    def __init__(self, src: str) -> None:
        self.toks = _tokenize(src)
        self.i = 0
        self.values: dict[str, Value] = {}

    # tokens
    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def fail(self, message: str, tok: _Tok | None = None) -> ParseError:
        t = tok or self.tok
        return ParseError(message, t.line, t.col)

    def next(self) -> _Tok:
        t = self.tok
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.text == text and self.tok.kind in ("punct", "ident")

    def expect(self, text: str) -> _Tok:
        if not self.at(text):
            found = self.tok.text or "end of file"
            raise self.fail(f"expected '{text}', found '{found}'")
        return self.next()

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def kind(self, kind: str, what: str) -> _Tok:
        if self.tok.kind != kind:
            raise self.fail(f"expected {what}, found '{self.tok.text or 'end of file'}'")
        return self.next()

    def items(self, close: str, item: Callable[[], _T]) -> list[_T]:
        """`item, item, ... close` (the opening bracket read already; a trailing comma allowed)."""
        out: list[_T] = []
        while not self.at(close):
            out.append(item())
            if not self.accept(","):
                break
        self.expect(close)
        return out

    def separated(self, item: Callable[[], _T]) -> list[_T]:
        """`item, item, ...`: one or more, unbracketed."""
        out = [item()]
        while self.accept(","):
            out.append(item())
        return out

    # pieces
    def type(self) -> Type:
        t = self.kind("ident", "a type")
        if t.text in ("vec", "stack"):
            self.expect("<")
            elems = self.items(">", self.type)
            if t.text == "stack":
                return StackType(tuple(elems))
            if not all(isinstance(e, TensorType) for e in elems):
                raise self.fail("vector elements must be tensors", t)
            return VectorType(tuple(e for e in elems if isinstance(e, TensorType)))
        if t.text not in DTYPES:
            raise self.fail(f"unknown type '{t.text}'", t)
        self.expect("[")
        return TensorType(tuple(self.items("]", self.dim)), t.text)

    def dim(self) -> int:
        d = self.kind("number", "a dimension")
        if not d.text.isdigit():
            raise self.fail(f"bad dimension '{d.text}'", d)
        return int(d.text)

    def typed(self) -> tuple[Type, bool]:
        t = self.type()
        return t, self.accept("stop_gradient")

    def define(self, tok: _Tok, type: Type, sg: bool) -> Value:
        name = tok.text[1:]
        if name in self.values:
            raise self.fail(f"value %{name} is defined twice", tok)
        v = Value(type, name, sg)
        self.values[name] = v
        return v

    def use(self) -> Value:
        t = self.kind("value", "a value")
        v = self.values.get(t.text[1:])
        if v is None:
            raise self.fail(f"undefined value {t.text}", t)
        return v

    def literal(self) -> Any:
        t = self.tok
        if self.accept("["):
            return self.items("]", self.literal)
        if t.kind == "number":
            self.next()
            return float(t.text) if any(c in t.text for c in ".eEin") else int(t.text)
        if t.kind == "ident":
            self.next()
            return {"true": True, "false": False}.get(t.text, t.text)
        raise self.fail(f"expected an attribute value, found '{t.text or 'end of file'}'")

    def params(self) -> list[Value]:
        self.expect("(")
        return self.items(")", self.param)

    def param(self) -> Value:
        tok = self.kind("value", "a parameter")
        self.expect(":")
        return self.define(tok, *self.typed())

    def attr(self) -> tuple[str, Any]:
        k = self.kind("ident", "an attribute name")
        self.expect("=")
        return k.text, self.literal()

    def op(self, block: Block) -> None:
        first = self.tok
        result_toks: list[_Tok] = []
        if first.kind == "value":
            result_toks = self.separated(lambda: self.kind("value", "a result"))
            self.expect("=")
        name_tok = self.kind("ident", "an op name")
        try:
            d = lookup(name_tok.text)
        except TypeRuleError as e:
            raise self.fail(str(e), name_tok) from None
        self.expect("(")
        operands = self.items(")", self.use)
        attrs: dict[str, Any] = {}
        attr_tok = self.tok
        if self.accept("{") and not self.tok.kind == "label":
            attrs = dict(self.items("}", self.attr))
        elif attr_tok.text == "{":
            self.i -= 1  # a region, not attributes
        types: list[tuple[Type, bool]] = []
        if result_toks:
            self.expect(":")
            types = self.separated(self.typed)
            if len(types) != len(result_toks):
                raise self.fail(f"{len(result_toks)} result(s) but {len(types)} type(s)", first)
        blocks = self.regions() if self.at("{") else []
        try:
            attrs = normalize_attrs(d, attrs)
        except TypeRuleError as e:
            raise self.fail(str(e), attr_tok) from None
        results = [self.define(t, ty, sg) for t, (ty, sg) in zip(result_toks, types)]
        op = Operation(d.name, operands, results, attrs, blocks)
        op.line, op.col = first.line, first.col
        block.append(op)

    def regions(self) -> list[Block]:
        self.expect("{")
        blocks = []
        while self.tok.kind == "label":
            label = self.next().text[1:]
            args = self.params() if self.at("(") else []
            self.expect(":")
            blk = Block(label, args)
            while not (self.tok.kind == "label" or self.at("}")):
                if self.tok.kind == "eof":
                    raise self.fail("unterminated block")
                self.op(blk)
            blocks.append(blk)
        self.expect("}")
        return blocks

    def program(self) -> Program:
        self.expect("program")
        p = Program(self.params())
        self.expect("{")
        while not self.at("return"):
            if self.tok.kind == "eof" or self.at("}"):
                raise self.fail("expected 'return' before the end of the program")
            self.op(p.block)
        self.expect("return")
        if self.tok.kind == "value":
            p.outputs = self.separated(self.use)
        self.expect("}")
        if self.tok.kind != "eof":
            raise self.fail(f"unexpected '{self.tok.text}' after the program")
        return p


def parse_program(src: str) -> Program:
    """Parse program text; raises ParseError naming line and column. Does not verify."""
    return _Parser(src).program()
