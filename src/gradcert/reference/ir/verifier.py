"""The verifier: def-before-use, signatures and type rules, block terminators, the in-place rule.

Each kind of violation is its own error class; each names the op, the value and the line, and
shows the program around it.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

from gradcert.reference.ir import Block, Operation, Program, Value
from gradcert.reference.ir.builder import check_arity, normalize_attrs
from gradcert.reference.ir.printer import Namer, print_program
from gradcert.reference.ir.types import StackType
from gradcert.reference.ops import DECLARED, INPLACE, OPS, TypeRuleError, lookup


class VerifyError(Exception):
    """A program breaks a rule of the IR; `line`/`col` locate the op (1-based)."""

    kind = "invalid program"

    def __init__(
        self, message: str, op: Operation | None, value: Value | None, line: int, col: int, context: str
    ) -> None:
        super().__init__(message)
        self.message, self.op, self.value, self.line, self.col, self.context = message, op, value, line, col, context

    def __str__(self) -> str:
        return f"{self.line}:{self.col}: {self.message}\n{self.context}"


class UseBeforeDefError(VerifyError):
    kind = "use before definition"


class SignatureError(VerifyError):
    kind = "bad signature"


class TypeMismatchError(VerifyError):
    kind = "type mismatch"


class TerminatorError(VerifyError):
    kind = "bad block terminator"


class InPlaceError(VerifyError):
    kind = "in-place rule"


class _Verifier:
    def __init__(self, program: Program, source: str | None, trusted: Collection[Operation] = ()) -> None:
        self.program = program
        self.trusted = trusted
        self.source = source
        self.parsed = source is not None
        self.errors: list[VerifyError] = []

    # The program is printed (and its values named) only to show where an error is: a valid
    # program, the common case, is never printed.
    @functools.cached_property
    def _printout(self) -> tuple[list[str], dict[Operation, int]]:
        lines: dict[Operation, int] = {}
        text = print_program(self.program, lines)
        return (self.source or text).splitlines(), lines

    @property
    def src(self) -> list[str]:
        return self._printout[0]

    @property
    def printed(self) -> dict[Operation, int]:
        return self._printout[1]

    @functools.cached_property
    def name(self) -> Namer:
        return Namer(self.program)

    def locate(self, op: Operation | None) -> tuple[int, int]:
        if op is None:
            return len(self.src), 1
        if self.parsed and op.line is not None:
            return op.line, op.col or 1
        line = self.printed.get(op, 1)
        text = self.src[line - 1] if line <= len(self.src) else ""
        return line, len(text) - len(text.lstrip()) + 1

    def error(self, cls: type[VerifyError], op: Operation | None, message: str, value: Value | None = None) -> None:
        line, col = self.locate(op)
        lo, hi = max(1, line - 2), min(len(self.src), line + 2)
        ctx = "\n".join(f"{'>' if i == line else ' '} {i:4d} | {self.src[i - 1]}" for i in range(lo, hi + 1))
        where = f"'{op.name}'" if op else "program"
        self.errors.append(cls(f"{where}: {message}", op, value, line, col, ctx))

    def v(self, value: Value) -> str:
        return self.name(value)

    def run(self) -> list[VerifyError]:
        visible = self.block(self.program.block, set(), top=True)
        for out in self.program.outputs:
            if out not in visible:
                self.error(UseBeforeDefError, None, f"output {self.v(out)} is not defined at the top level", out)
        return self.errors

    def block(self, blk: Block, scope: set[Value], top: bool = False) -> set[Value]:
        """Check `blk`'s ops, `scope` the values visible where it begins; returns the values visible
        at its end. One set serves every block: a nested block's values are added to it while the
        block is checked and taken out after (copying it for each block made a program of nested
        loops quadratic)."""
        made = [a for a in blk.args if a not in scope]  # (a value defined twice is corrupt IR: kept)
        scope.update(made)
        last = len(blk.ops) - 1
        for i, op in enumerate(blk.ops):
            if op.parent is not blk:
                self.error(SignatureError, op, "op's parent block is wrong (corrupt IR)")
            if op.name == "yield" and (top or i != last):
                self.error(TerminatorError, op, "yield may only end a nested block")
            for v in op.operands:
                if v not in scope:
                    known = v.owner is not None
                    self.error(
                        UseBeforeDefError,
                        op,
                        f"operand {self.v(v)} is "
                        + ("used before its definition or outside its block" if known else "undefined"),
                        v,
                    )
            if op not in self.trusted and not _known_good(op):
                self.signature(op)
            if op.name in INPLACE:
                self.inplace(op, blk, i)
            for sub in op.blocks:
                self.block(sub, scope)
                if sub.terminator is None:
                    self.error(TerminatorError, op, f"block ^{sub.label} does not end with yield")
            if top:
                scope.update(op.results)
                continue
            for r in op.results:
                if r not in scope:
                    scope.add(r)
                    made.append(r)
        if not top:
            scope.difference_update(made)
        return scope

    def signature(self, op: Operation) -> None:
        try:
            d = lookup(op.name)
            check_arity(d, len(op.operands), len(op.blocks))
            if not _same_attrs(normalize_attrs(d, op.attrs), op.attrs):
                raise TypeRuleError(f"attributes {op.attrs} are not in normal form")
            labels = tuple(b.label for b in op.blocks)
            if labels != d.signature.regions:
                raise TypeRuleError(f"blocks are {list(labels)}, expected {list(d.signature.regions)}")
        except TypeRuleError as e:
            self.error(SignatureError, op, str(e))
            return
        types = [v.type for v in op.operands]
        try:
            for b, want in zip(op.blocks, d.signature.block_args(types) if d.signature.block_args else []):
                got = [a.type for a in b.args]
                if got != want:
                    raise TypeRuleError(
                        f"block ^{b.label} takes ({', '.join(map(str, got))}), expected ({', '.join(map(str, want))})"
                    )
            inferred = d.infer(types, op.attrs, op.blocks)
        except TypeRuleError as e:
            self.error(TypeMismatchError, op, str(e))
            return
        declared = [r.type for r in op.results]
        if inferred == [DECLARED]:
            if len(declared) != 1 or not isinstance(declared[0], StackType):
                self.error(TypeMismatchError, op, "must declare one stack result")
                return
        elif declared != inferred:
            self.error(
                TypeMismatchError,
                op,
                f"result type ({', '.join(map(str, declared))}) differs from the type rule's "
                f"({', '.join(map(str, inferred))})",
                op.results[0] if op.results else None,
            )
            return
        _remember_good(op)

    def inplace(self, op: Operation, blk: Block, index: int) -> None:
        d = OPS[op.name]
        assert d.autodiff.inplace_of is not None
        if d.autodiff.inplace_of >= len(op.operands):
            return
        v = op.operands[d.autodiff.inplace_of]
        if v.block is not blk:
            self.error(InPlaceError, op, f"{self.v(v)} is consumed in place outside the block defining it", v)
            return
        for later in blk.ops[index + 1 :]:
            if any(v in u.operands for u in later.walk()):
                self.error(InPlaceError, later, f"{self.v(v)} is used after '{op.name}' consumed it in place", v)
                return
        if blk is self.program.block and v in self.program.outputs:
            self.error(InPlaceError, op, f"output {self.v(v)} is consumed in place by '{op.name}'", v)


# Signatures found good, of ops without blocks: an op's signature check is a function of its name,
# attributes and operand and result types alone, and a few hundred such combinations make up the
# programs certify draws (and their backward programs), so each is checked once, not for every op
# of every program (the type rules were a third of checking a backward program's invariants).
_GOOD: set[tuple[object, ...]] = set()
_GOOD_MAX = 100_000  # nightly runs meet many constants: start over past this many


def _same_attrs(a: dict[str, object], b: dict[str, object]) -> bool:
    """Equal, kind for kind (`2 == 2.0` and `True == 1`, but an integer scale is not in normal form)."""
    return a.keys() == b.keys() and all(type(v) is type(b[k]) and v == b[k] for k, v in a.items())


def _key(op: Operation) -> tuple[object, ...] | None:
    if op.blocks:
        return None  # a region op's types depend on its blocks: checked every time
    # attributes by their repr: `True == 1 == 1.0` and `(1,) == [1]` are not the same attribute;
    # the common shapes spelt out (one result of one or two operands: a third of checking a
    # backward program went to making this key); the others with their operand count
    o, r = op.operands, op.results
    a = repr(op.attrs) if op.attrs else ""
    if len(r) == 1:
        if len(o) == 1:
            return op.name, a, o[0].type, r[0].type
        if len(o) == 2:
            return op.name, a, o[0].type, o[1].type, r[0].type
    return op.name, a, len(o), *[v.type for v in o], *[v.type for v in r]


def _known_good(op: Operation) -> bool:
    key = _key(op)
    return key is not None and key in _GOOD


def _remember_good(op: Operation) -> None:
    key = _key(op)
    if key is not None:
        if len(_GOOD) >= _GOOD_MAX:
            _GOOD.clear()
        _GOOD.add(key)


def verify_all(program: Program, source: str | None = None, trusted: Collection[Operation] = ()) -> list[VerifyError]:
    """Every violation, in program order (empty when the program is valid). `trusted`: ops whose
    signature and types are known good (checked before, and unchanged since): their type rules
    are not run again; every other rule still holds for them."""
    return _Verifier(program, source, trusted).run()


def verify(program: Program, source: str | None = None) -> None:
    """Raise the first violation. `source`: the text the program was parsed from, for locations."""
    errors = verify_all(program, source)
    if errors:
        raise errors[0]
