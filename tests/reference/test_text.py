"""The text format: exact round trip, determinism, parse errors with line and column."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcert.reference import ParseError, ProgramBuilder, f64, parse_program, print_program
from gradcert.reference.ir.loader import load_program

from ..conftest import EXAMPLES, ROOT


def test_examples_cover_every_family() -> None:
    from gradcert.reference.ops import OPS

    used = {op.name for p in EXAMPLES for op in load_program(p).walk()}
    families = {OPS[n].drawing.family for n in used}
    assert families >= {
        "unary",
        "binary",
        "reduction",
        "matmul",
        "shape",
        "creation",
        "vector",
        "control",
        "misc",
        "compare",
    }
    assert len(EXAMPLES) >= 12
    assert {"if", "while", "tanh_", "combine", "split", "concat", "stack", "unbind", "add_n"} <= used


def test_example_round_trips(example) -> None:  # type: ignore[no-untyped-def]
    src = example.read_text()
    p = parse_program(src)
    text = print_program(p)
    assert print_program(parse_program(text)) == text
    # hand-written examples are written in the printed form, comments aside
    body = [line for line in src.splitlines() if not line.lstrip().startswith("#")]
    assert text.splitlines() == body


_UNARY = ["tanh", "sin", "exp", "sigmoid", "square", "neg", "abs"]
_BINARY = ["add", "subtract", "multiply", "maximum"]


@st.composite
def chains(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    pb = ProgramBuilder()
    shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    vals = [pb.input(f"in{i}", f64(*shape), stop_gradient=draw(st.booleans())) for i in range(draw(st.integers(1, 3)))]
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            vals.append(pb.emit(draw(st.sampled_from(_UNARY)), draw(st.sampled_from(vals))))
        else:
            vals.append(
                pb.emit(draw(st.sampled_from(_BINARY)), draw(st.sampled_from(vals)), draw(st.sampled_from(vals)))
            )
        if draw(st.booleans()):
            vals.append(pb.scale(vals[-1], scale=draw(st.floats(-1e3, 1e3)), bias=draw(st.floats(allow_nan=False))))
    if draw(st.booleans()):
        c = pb.less_than(pb.sum(vals[-1]), pb.const(0.5))
        (r,) = pb.if_(c, lambda b: [b.tanh(vals[-1])], lambda b: [vals[0]])
        vals.append(r)
    return pb.build(*vals[-draw(st.integers(1, len(vals))) :])


@given(chains())
@settings(max_examples=60, deadline=None)
def test_round_trip_property(p) -> None:  # type: ignore[no-untyped-def]
    text = print_program(p)
    assert print_program(parse_program(text)) == text
    assert print_program(p) == text  # deterministic


@pytest.mark.parametrize(
    "src, line, col, words",
    [
        ("program(%x: f64[3]) {\n  %y = tanh(%x) : f64[3]\n  return %z\n}\n", 3, 10, "undefined value %z"),
        ("program(%x: f64[3]) {\n  %y = tanh(%x) f64[3]\n  return %y\n}\n", 2, 17, "expected ':'"),
        ("program(%x: f64[3]) {\n  %y = frobnicate(%x) : f64[3]\n  return %y\n}\n", 2, 8, "unknown op"),
        ("program(%x: q64[3]) {\n  return %x\n}\n", 1, 13, "unknown type"),
        (
            "program(%x: f64[3]) {\n  %y = tanh(%x) : f64[3]\n  %y = tanh(%x) : f64[3]\n  return %y\n}\n",
            3,
            3,
            "defined twice",
        ),
        (
            "program(%x: f64[3]) {\n  %y = scale(%x) {scale=1.0, speed=2} : f64[3]\n  return %y\n}\n",
            2,
            18,
            "no attribute 'speed'",
        ),
        ("program(%x: f64[3]) {\n  %y = tanh(%x) : f64[3]\n", 3, 1, "expected 'return'"),
    ],
)
def test_parse_errors_name_line_and_column(src: str, line: int, col: int, words: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_program(src)
    assert (e.value.line, e.value.col) == (line, col)
    assert words in e.value.message


def test_names_are_kept_and_numbers_avoid_them() -> None:
    pb = ProgramBuilder()
    x = pb.input("x", f64(2))
    y = pb.tanh(x)
    y.name = "0"  # a user name that looks like a number
    z = pb.exp(y)
    text = print_program(pb.build(z))
    assert "%0 = tanh(%x)" in text and "%1 = exp(%0)" in text


def test_every_program_shown_in_the_readme_and_docs_parses() -> None:
    """A program in a ``` block of the README or docs/ is one a reader may copy: it parses."""
    import re

    from gradcert.reference.ir.parser import parse_program

    root = ROOT
    shown = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for block in re.findall(r"```\n(.*?)```", page.read_text(), re.S):
            if block.lstrip().startswith("program("):
                shown.append((page.name, block))
    assert shown, "no program shown"
    for name, block in shown:
        try:
            parse_program(block)
        except ParseError as e:
            raise AssertionError(f"{name}: {e}") from None
