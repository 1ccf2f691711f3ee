"""The text format's parser: program text (`printer.py` writes it) back to a program, with errors
that name the line and column. It does not verify (`verifier.py` does)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gradcert.reference.ir import Block, Operation, Program, Value
from gradcert.reference.ir.builder import normalize_attrs
from gradcert.reference.ir.lexer import ParseError, Token, tokenize
from gradcert.reference.ir.types import DTYPES, StackType, TensorType, Type, VectorType
from gradcert.reference.ops import TypeRuleError, lookup

_T = TypeVar("_T")


class _Parser:
    def __init__(self, src: str) -> None:
        self.toks = tokenize(src)
        self.i = 0
        self.values: dict[str, Value] = {}

    # tokens
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def fail(self, message: str, tok: Token | None = None) -> ParseError:
        t = tok or self.tok
        return ParseError(message, t.line, t.col)

    def next(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.text == text and self.tok.kind in ("punct", "ident")

    def expect(self, text: str) -> Token:
        if not self.at(text):
            found = self.tok.text or "end of file"
            raise self.fail(f"expected '{text}', found '{found}'")
        return self.next()

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def kind(self, kind: str, what: str) -> Token:
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

    def define(self, tok: Token, type: Type, sg: bool) -> Value:
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
        result_toks: list[Token] = []
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
