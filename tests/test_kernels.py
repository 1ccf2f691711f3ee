"""Every op kernel agrees with a direct NumPy formulation, and runs unchanged under
array_api_strict (so no NumPy-only call leaks into a kernel)."""

from __future__ import annotations

from typing import Any

import array_api_strict
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradcert.reference import OPS, ProgramBuilder, TensorType, run
from gradcert.reference.interpreter import to_numpy

F = "f64"
# op -> (operand types, attrs, NumPy formulation). Inputs are drawn inside each op's domain.
SPECS: dict[str, tuple[list[TensorType], dict[str, Any], Any]] = {
    "tanh": ([TensorType((3, 2))], {}, np.tanh),
    "sin": ([TensorType((3,))], {}, np.sin),
    "cos": ([TensorType((3,))], {}, np.cos),
    "exp": ([TensorType((3,))], {}, np.exp),
    "log": ([TensorType((3,))], {}, np.log),
    "sigmoid": ([TensorType((3,))], {}, lambda x: 1 / (1 + np.exp(-x))),
    "relu": ([TensorType((4,))], {}, lambda x: np.maximum(x, 0)),
    "abs": ([TensorType((4,))], {}, np.abs),
    "sign": ([TensorType((4,))], {}, np.sign),
    "sqrt": ([TensorType((3,))], {}, np.sqrt),
    "square": ([TensorType((3,))], {}, np.square),
    "neg": ([TensorType((3,))], {}, np.negative),
    "reciprocal": ([TensorType((3,))], {}, np.reciprocal),
    "scale": ([TensorType((3,))], {"scale": 2.5, "bias": -1.0}, lambda x: 2.5 * x - 1.0),
    "add": ([TensorType((2, 3)), TensorType((3,))], {}, np.add),
    "subtract": ([TensorType((2, 1)), TensorType((3,))], {}, np.subtract),
    "multiply": ([TensorType((2, 3)), TensorType((2, 1))], {}, np.multiply),
    "divide": ([TensorType((2, 3)), TensorType((3,))], {}, np.divide),
    "maximum": ([TensorType((2, 3)), TensorType((3,))], {}, np.maximum),
    "minimum": ([TensorType((2, 3)), TensorType((3,))], {}, np.minimum),
    "pow": ([TensorType((2, 3)), TensorType((3,))], {}, np.power),
    "sum": (
        [TensorType((2, 3, 4))],
        {"axes": [0, 2], "keepdim": True},
        lambda x: np.sum(x, axis=(0, 2), keepdims=True),
    ),
    "mean": ([TensorType((2, 3))], {"axes": [-1]}, lambda x: np.mean(x, axis=-1)),
    "matmul": ([TensorType((2, 3, 4)), TensorType((4, 2))], {}, np.matmul),
    "reshape": ([TensorType((2, 6))], {"shape": [3, 4]}, lambda x: x.reshape(3, 4)),
    "transpose": ([TensorType((2, 3, 4))], {"perm": [2, 0, 1]}, lambda x: x.transpose(2, 0, 1)),
    "slice": ([TensorType((4, 5))], {"axes": [1], "starts": [1], "ends": [4]}, lambda x: x[:, 1:4]),
    "pad": ([TensorType((2, 3))], {"low": [1, 0], "high": [0, 2]}, lambda x: np.pad(x, [(1, 0), (0, 2)])),
    "expand": ([TensorType((3, 1))], {"shape": [2, 3, 4]}, lambda x: np.broadcast_to(x, (2, 3, 4))),
    "squeeze": ([TensorType((3, 1, 2))], {"axes": [1]}, lambda x: x.squeeze(1)),
    "unsqueeze": ([TensorType((3, 2))], {"axes": [0, -1]}, lambda x: x[None, :, :, None]),
    "full": ([], {"shape": [2, 2], "value": 1.5}, lambda: np.full((2, 2), 1.5)),
    "full_like": ([TensorType((3,))], {"value": -2.0}, lambda x: np.full_like(x, -2.0)),
    "cast": ([TensorType((3,))], {"dtype": "f32"}, lambda x: x.astype(np.float32)),
    "assign": ([TensorType((3,))], {}, lambda x: x.copy()),
    "less_than": ([TensorType((3,)), TensorType((3,))], {}, np.less),
    "less_equal": ([TensorType((3,)), TensorType((3,))], {}, np.less_equal),
    "greater_than": ([TensorType((3,)), TensorType(())], {}, np.greater),
    "greater_equal": ([TensorType((3,)), TensorType((3,))], {}, np.greater_equal),
}
# Ops whose kernels take or return vectors, stacks or blocks: tested through programs below.
STRUCTURAL = {
    "combine",
    "split",
    "concat",
    "split_with_sections",
    "stack",
    "unbind",
    "add_n",
    "where",
    "if",
    "while",
    "yield",
    "stack_create",
    "tuple_push",
    "tuple_pop",
    "has_elements",
}


def test_every_op_is_tested() -> None:
    base_ops = {n for n, d in OPS.items() if d.base is None}
    assert base_ops - STRUCTURAL == set(SPECS), "an op without a kernel test"
    # in-place variants share their base's kernel: tested below against it
    assert all(OPS[n].base in OPS for n in OPS if OPS[n].base)


def _inputs(name: str, types: list[TensorType], rng: np.random.Generator) -> list[np.ndarray]:
    d = OPS[name]
    out = []
    for i, t in enumerate(types):
        lo, hi = d.domain[i] if i < len(d.domain) and d.domain[i] else (-2.0, 2.0)  # type: ignore[misc]
        out.append(rng.uniform(lo, hi, t.shape))
    return out


def _one_op(name: str, types: list[TensorType], attrs: dict[str, Any]):  # type: ignore[no-untyped-def]
    pb = ProgramBuilder()
    xs = [pb.input(f"x{i}", t) for i, t in enumerate(types)]
    return pb.build(pb.emit(name, *xs, **attrs))


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("xp", [np, array_api_strict], ids=["numpy", "array_api_strict"])
def test_kernel_matches_numpy(name: str, xp: Any) -> None:
    types, attrs, ref = SPECS[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    xs = _inputs(name, types, rng)
    (got,) = run(_one_op(name, types, attrs), [xp.asarray(x) for x in xs], xp=xp).outputs
    want = ref(*xs)
    got = to_numpy(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(n for n, d in OPS.items() if d.base is not None))
def test_inplace_variant_overwrites_its_operand_with_the_base_result(name: str) -> None:
    d = OPS[name]
    base = d.base
    assert base is not None
    types, attrs, _ = SPECS[base]
    types = [types[0], *types[1:]] if len(types) == 1 else [types[0], TensorType(types[0].shape)]
    xs = _inputs(base, types, np.random.default_rng(1))
    want = run(_one_op(base, types, attrs), xs).outputs[0]
    from gradcert.reference import Interpreter

    it = Interpreter()
    p = _one_op(name, types, attrs)
    (got,) = it.run(p, xs).outputs
    assert got is it.env[p.inputs[d.inplace_of or 0]], "the result must be the operand's own buffer"
    np.testing.assert_array_equal(got, want)


@given(hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=4), elements=st.floats(-3, 3)))
@settings(max_examples=50, deadline=None)
def test_elementwise_kernels_property(x: np.ndarray) -> None:
    for name, fn in [("tanh", np.tanh), ("square", np.square), ("abs", np.abs), ("sin", np.sin)]:
        (got,) = run(_one_op(name, [TensorType(x.shape)], {}), [x]).outputs
        np.testing.assert_allclose(got, fn(x), rtol=1e-13, atol=1e-13)


VECTOR_SRC = """program(%a: f64[2,3], %b: f64[2,3], %c: f64[2,3]) {
  %v = combine(%a, %b, %c) : vec<f64[2,3], f64[2,3], f64[2,3]>
  %cat = concat(%v) {axis=0} : f64[6,3]
  %parts = split_with_sections(%cat) {axis=0, sections=[1, 5]} : vec<f64[1,3], f64[5,3]>
  %p0, %p1 = split(%parts) : f64[1,3], f64[5,3]
  %st = stack(%v) {axis=2} : f64[2,3,3]
  %rows = unbind(%st) {axis=1} : vec<f64[2,3], f64[2,3], f64[2,3]>
  %n = add_n(%rows) : f64[2,3]
  %zero = full() {dtype=f64, shape=[], value=0.0} : f64[]
  %pos = greater_than(%a, %zero) : bool[2,3]
  %w = where(%pos, %b, %c) : f64[2,3]
  return %p0, %p1, %n, %w
}
"""


@pytest.mark.parametrize("xp", [np, array_api_strict], ids=["numpy", "array_api_strict"])
def test_vector_kernels(xp: Any) -> None:
    from gradcert.reference import parse_program

    rng = np.random.default_rng(0)
    a, b, c = (rng.normal(size=(2, 3)) for _ in range(3))
    p0, p1, n, w = (
        to_numpy(o) for o in run(parse_program(VECTOR_SRC), [xp.asarray(v) for v in (a, b, c)], xp=xp).outputs
    )
    cat = np.concatenate([a, b, c], axis=0)
    np.testing.assert_array_equal(p0, cat[:1])
    np.testing.assert_array_equal(p1, cat[1:])
    st3 = np.stack([a, b, c], axis=2)
    np.testing.assert_allclose(n, st3[:, 0] + st3[:, 1] + st3[:, 2])
    np.testing.assert_array_equal(w, np.where(a > 0, b, c))
