"""Each verifier violation is its own error, naming the op, the value and the line."""

from __future__ import annotations

import pytest

from gradcert.reference import Operation, ProgramBuilder, Value, f64, parse_program, verify
from gradcert.reference.ir.verifier import (
    InPlaceError,
    SignatureError,
    TerminatorError,
    TypeMismatchError,
    UseBeforeDefError,
    VerifyError,
    verify_all,
)


def _check(src: str, cls: type[VerifyError], line: int, words: str) -> VerifyError:
    p = parse_program(src)
    with pytest.raises(cls) as e:
        verify(p, src)
    assert e.value.line == line
    assert words in e.value.message
    assert f"> {line:4d} |" in e.value.context  # the program around it, the line marked
    return e.value


def test_type_mismatch() -> None:
    _check("program(%x: f64[3]) {\n  %y = tanh(%x) : f64[4]\n  return %y\n}\n", TypeMismatchError, 2, "'tanh'")


def test_broadcast_mismatch() -> None:
    e = _check(
        "program(%x: f64[3], %y: f64[4]) {\n  %z = add(%x, %y) : f64[3]\n  return %z\n}\n",
        TypeMismatchError,
        2,
        "do not broadcast",
    )
    assert "[3]" in e.message and "[4]" in e.message


def test_use_after_inplace() -> None:
    src = (
        "program(%x: f64[3]) {\n"
        "  %a = exp(%x) : f64[3]\n"
        "  %b = tanh_(%a) : f64[3]\n"
        "  %c = add(%a, %b) : f64[3]\n"
        "  return %c\n"
        "}\n"
    )
    e = _check(src, InPlaceError, 4, "%a is used after 'tanh_' consumed it in place")
    assert e.value is not None and e.value.name == "a"


def test_inplace_of_outer_value_inside_a_loop_body() -> None:
    src = """program(%x: f64[3]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %n = full() {dtype=i64, shape=[], value=2.0} : i64[]
  %i = while(%i0) : i64[] {
  ^cond(%c: i64[]):
    %go = less_than(%c, %n) : bool[]
    yield(%go)
  ^body(%b: i64[]):
    %t = tanh_(%x) : f64[3]
    yield(%b)
  }
  return %i
}
"""
    _check(src, InPlaceError, 9, "outside the block defining it")


def test_output_consumed_in_place() -> None:
    _check(
        "program(%x: f64[3]) {\n  %a = exp(%x) : f64[3]\n  %b = tanh_(%a) : f64[3]\n  return %a, %b\n}\n",
        InPlaceError,
        3,
        "output %a",
    )


def test_branch_types_differ() -> None:
    src = """program(%x: f64[3], %y: f64[2]) {
  %z = full() {dtype=f64, shape=[], value=0.0} : f64[]
  %c = greater_than(%z, %z) : bool[]
  %r = if(%c) : f64[3] {
  ^then:
    yield(%x)
  ^else:
    yield(%y)
  }
  return %r
}
"""
    _check(src, TypeMismatchError, 4, "branches yield different types")


def test_missing_terminator() -> None:
    src = """program(%x: f64[3]) {
  %z = full() {dtype=f64, shape=[], value=0.0} : f64[]
  %c = greater_than(%z, %z) : bool[]
  %r = if(%c) : f64[3] {
  ^then:
    %t = tanh(%x) : f64[3]
  ^else:
    yield(%x)
  }
  return %r
}
"""
    errors = verify_all(parse_program(src), src)
    assert any(isinstance(e, TerminatorError) and "^then does not end with yield" in e.message for e in errors)


def test_while_body_arity() -> None:
    src = """program(%x: f64[3]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %i, %h = while(%i0, %x) : i64[], f64[3] {
  ^cond(%c: i64[], %ch: f64[3]):
    %go = less_than(%c, %i0) : bool[]
    yield(%go)
  ^body(%b: i64[], %bh: f64[3]):
    yield(%b)
  }
  return %h
}
"""
    _check(src, TypeMismatchError, 3, "^body yields (i64[]), loop carries (i64[], f64[3])")


def test_block_args_must_match_carried_types() -> None:
    src = """program(%x: f64[3]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %i = while(%i0) : i64[] {
  ^cond(%c: f64[]):
    %go = less_than(%c, %c) : bool[]
    yield(%go)
  ^body(%b: i64[]):
    yield(%b)
  }
  return %i
}
"""
    _check(src, TypeMismatchError, 3, "block ^cond takes (f64[])")


def test_value_of_a_sibling_branch_is_not_visible() -> None:
    src = """program(%x: f64[3]) {
  %z = full() {dtype=f64, shape=[], value=0.0} : f64[]
  %c = greater_than(%z, %z) : bool[]
  %r = if(%c) : f64[3] {
  ^then:
    %t = tanh(%x) : f64[3]
    yield(%t)
  ^else:
    yield(%t)
  }
  return %r
}
"""
    _check(src, UseBeforeDefError, 9, "operand %t is used before its definition or outside its block")


def test_use_before_def_built_by_api() -> None:
    pb = ProgramBuilder()
    x = pb.input("x", f64(3))
    y = pb.tanh(x)
    z = pb.exp(y)
    blk = pb.program.block
    blk.ops.reverse()  # now exp(%y) comes before the op defining %y
    with pytest.raises(UseBeforeDefError) as e:
        verify(pb.build(z))
    assert e.value.op is blk.ops[0] and e.value.line == 2


def test_signature_arity() -> None:
    pb = ProgramBuilder()
    x = pb.input("x", f64(3))
    bad = Operation("tanh", [x, x], [Value(f64(3))])
    pb.program.block.append(bad)
    with pytest.raises(SignatureError, match="takes 1 operand"):
        verify(pb.build(bad.results[0]))


def test_yield_at_top_level() -> None:
    pb = ProgramBuilder()
    x = pb.input("x", f64(3))
    pb.op("yield", [x])
    with pytest.raises(TerminatorError, match="yield may only end a nested block"):
        verify(pb.build(x))


def test_examples_verify(example) -> None:  # type: ignore[no-untyped-def]
    src = example.read_text()
    assert verify_all(parse_program(src), src) == []


def test_signatures_found_good_do_not_hide_a_bad_one() -> None:
    """Each signature found good is checked once a process (`_GOOD`, keyed by name, attributes,
    operand and result types): an op that differs in any of them, or in its operand count, is
    checked again."""
    pb = ProgramBuilder()
    x, y = pb.input("x", f64(3)), pb.input("y", f64(3))
    good = [pb.add(x, y), pb.tanh(x), pb.scale(x, scale=2.0, bias=0.0), pb.add_n(pb.combine(x, y))]
    assert verify_all(pb.build(*good)) == []
    for bad, words in [
        (Operation("add", [x, y], [Value(f64(4))]), "result type"),
        (Operation("tanh", [x], [Value(f64(1))]), "result type"),
        (Operation("scale", [x], [Value(f64(3))], {"scale": 2, "bias": 0.0}), "normal form"),  # int 2
        (Operation("tanh", [x, y], [Value(f64(3))]), "takes 1 operand"),
    ]:
        pb.program.block.append(bad)
        errors = verify_all(pb.build(bad.results[0]))
        assert len(errors) == 1 and errors[0].op is bad and words in errors[0].message, (bad, errors)
        pb.program.block.ops.remove(bad)
