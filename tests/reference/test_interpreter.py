"""The interpreter: in-place overwrites, copies at block boundaries, the trace, the trip limit."""

from __future__ import annotations

import array_api_strict
import numpy as np
import pytest

from gradcert.reference import Interpreter, InterpreterError, f64, i64, parse_program, run
from gradcert.reference.domains import safe_inputs
from gradcert.reference.interpreter import to_numpy
from gradcert.reference.ir.builder import ProgramBuilder
from gradcert.reference.ir.loader import load_program


def test_examples_agree_between_numpy_and_array_api_strict(example) -> None:  # type: ignore[no-untyped-def]
    p = load_program(example)
    xs = safe_inputs(p, seed=3)
    a = run(p, xs)
    b = run(p, [array_api_strict.asarray(x) for x in xs], xp=array_api_strict)
    assert len(a.outputs) == len(b.outputs)
    for x, y in zip(a.outputs, b.outputs):
        np.testing.assert_allclose(to_numpy(y), x, rtol=1e-13, atol=1e-14)
    assert [(op, d) for op, d in a.trace] == [(op, d) for op, d in b.trace]


def test_to_numpy_makes_a_numpy_scalar_a_0d_array_of_its_value_and_dtype() -> None:
    # (NumPy reductions and ufuncs of 0-d arrays return scalars; a kink's side is one)
    for x in (np.float64(-1.0), np.float32(0.5), np.int64(3), np.bool_(True)):
        got = to_numpy(x)
        assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == x.dtype and got == x
        assert got.tobytes() == np.asarray(x).tobytes()


def test_inplace_overwrites_and_inputs_are_not_touched() -> None:
    p = parse_program("program(%x: f64[3]) {\n  %a = exp(%x) : f64[3]\n  %b = tanh_(%a) : f64[3]\n  return %b\n}\n")
    x = np.array([0.1, 0.2, 0.3])
    it = Interpreter()
    (b,) = it.run(p, [x]).outputs
    a = it.env[p.block.ops[0].results[0]]
    assert b is a  # the in-place result is the operand's buffer, now holding tanh(exp(x))
    np.testing.assert_allclose(a, np.tanh(np.exp(x)))
    np.testing.assert_array_equal(x, [0.1, 0.2, 0.3])  # the caller's array is copied on entry


def test_inplace_inside_loop_body_does_not_clobber_the_initial_value() -> None:
    pb = ProgramBuilder()
    x = pb.input("x", f64(2))
    n = pb.const(2, dtype="i64")
    _, h = pb.while_(
        [pb.const(0, dtype="i64"), x],
        lambda b, i, a: b.less_than(i, n),
        lambda b, i, a: [b.add(i, b.const(1, dtype="i64")), b.tanh_(a)],
    )
    p = pb.build(h, pb.exp(x))
    h_out, ex = run(p, [np.array([0.5, -0.5])]).outputs
    np.testing.assert_allclose(h_out, np.tanh(np.tanh([0.5, -0.5])))
    np.testing.assert_allclose(ex, np.exp([0.5, -0.5]))


def test_trace_records_branches_trips_and_kinks() -> None:
    src = """program(%x: f64[2], %n: i64[]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %i, %h = while(%i0, %x) : i64[], f64[2] {
  ^cond(%ci: i64[], %ch: f64[2]):
    %go = less_than(%ci, %n) : bool[]
    yield(%go)
  ^body(%bi: i64[], %bh: f64[2]):
    %one = full() {dtype=i64, shape=[], value=1.0} : i64[]
    %ni = add(%bi, %one) : i64[]
    %r = relu(%bh) : f64[2]
    yield(%ni, %r)
  }
  return %h
}
"""
    prog = parse_program(src)
    trace = run(prog, [np.array([1.0, -1.0]), np.array(3)]).trace
    whiles = [d for op, d in trace if op.name == "while"]
    relus = [np.frombuffer(d) for op, d in trace if op.name == "relu"]
    assert whiles == [3]
    assert len(relus) == 3 and list(relus[0]) == [1.0, -1.0]
    # moving one input across relu's kink changes the trace; a small move does not
    same = run(prog, [np.array([1.01, -0.99]), np.array(3)]).trace
    flipped = run(prog, [np.array([1.0, 0.5]), np.array(3)]).trace
    key = [(op, d) for op, d in trace]
    assert [(op, d) for op, d in same] == key
    assert [(op, d) for op, d in flipped] != key


def test_trip_limit_is_an_error_not_a_hang() -> None:
    src = """program(%x: f64[]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %i = while(%i0) : i64[] {
  ^cond(%c: i64[]):
    %go = greater_equal(%c, %i0) : bool[]
    yield(%go)
  ^body(%b: i64[]):
    yield(%b)
  }
  return %i
}
"""
    with pytest.raises(InterpreterError, match="exceeded the trip limit of 50"):
        Interpreter(trip_limit=50).run(parse_program(src), [np.array(0.0)])


def test_bad_input_shape_names_the_input() -> None:
    pb = ProgramBuilder()
    x = pb.input("x", f64(3))
    with pytest.raises(InterpreterError, match=r"input %x has shape \[2\], expected \[3\]"):
        run(pb.build(pb.tanh(x)), [np.zeros(2)])


def test_integer_inputs() -> None:
    pb = ProgramBuilder()
    n = pb.input("n", i64())
    assert run(pb.build(pb.add(n, n)), [np.array(2)]).outputs[0] == 4
