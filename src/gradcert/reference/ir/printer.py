"""The text format's printer: the one way programs are shown, stored and diffed (`parser.py` reads
them back).

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
from collections.abc import Iterator
from typing import Any

from gradcert.reference.ir import Block, Operation, Program, Value
from gradcert.reference.ir.types import Type


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
