"""Every op kernel agrees with a direct NumPy formulation, and runs unchanged under
array_api_strict (so no NumPy-only call leaks into a kernel)."""

from __future__ import annotations

from typing import Any

import array_api_strict
import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradcert.reference import OPS, ProgramBuilder, TensorType, run
from gradcert.reference.autodiff.gradients import compute
from gradcert.reference.finite_diff import jacobian_vjp
from gradcert.reference.interpreter import to_numpy
from gradcert.reference.ir.types import is_differentiable

F = "f64"
I64 = "i64"


def _added(x: np.ndarray, at: tuple[Any, ...], v: np.ndarray) -> np.ndarray:
    out = x.copy()
    np.add.at(out, at, v)
    return out


def _grid(indices: np.ndarray, axis: int) -> tuple[Any, ...]:
    """The full index of every element of `indices` into the array it indexes along `axis`."""
    g = list(np.indices(indices.shape))
    g[axis] = indices
    return tuple(g)


def _put(x: np.ndarray, i: np.ndarray, v: np.ndarray, add: bool) -> np.ndarray:
    if add:
        return _added(x, _grid(i, 1), v)
    out = x.copy()
    np.put_along_axis(out, i, v, axis=1)
    return out


def _scatter(x: np.ndarray, i: np.ndarray, u: np.ndarray, overwrite: bool) -> np.ndarray:
    out = x.copy()
    if overwrite:
        out[i] = u  # (NumPy keeps the last of repeated indices)
        return out
    out[i] = 0.0
    return _added(out, (i,), u)


def _set(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = x.copy()
    out[:, 1:3] = v
    return out


def _topk(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    i = np.argsort(-x, axis=1, kind="stable")[:, :2]
    return np.take_along_axis(x, i, axis=1), i


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


# Index operands: fixed, with duplicates where the op accumulates (`put_along_axis(assign)` is
# defined only without them).
INDEX = {
    "gather": [np.array([2, 0, 2])],
    "index_select": [np.array([1, 1])],
    "index_add": [np.array([0, 2, 0])],
    "take_along_axis": [np.array([[0, 2, 2, 1], [1, 1, 0, 0]])],
    "put_along_axis": [np.array([[0, 2], [1, 0]])],
    "put_along_axis/add": [np.array([[0, 0, 3], [2, 2, 2]])],
    "scatter": [np.array([2, 0, 2])],
    "scatter/add": [np.array([1, 1, 0])],
    "last_occurrence": [np.array([3, 1, 3, 0, 1])],
}
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
    "erf": ([TensorType((4,))], {}, scipy.special.erf),
    "gelu": ([TensorType((4,))], {}, lambda x: x * (1 + scipy.special.erf(x / np.sqrt(2))) / 2),
    "gelu/tanh": ([TensorType((4,))], {"approximate": True}, _gelu_tanh),
    "clip": ([TensorType((2, 3))], {"min": -0.5, "max": 1.0}, lambda x: np.clip(x, -0.5, 1.0)),
    "softmax": ([TensorType((2, 3))], {"axis": 0}, lambda x: scipy.special.softmax(x, axis=0)),
    "log_softmax": ([TensorType((2, 3))], {"axis": -1}, lambda x: scipy.special.log_softmax(x, axis=-1)),
    "logsumexp": (
        [TensorType((2, 3, 2))],
        {"axes": [0, 2]},
        lambda x: scipy.special.logsumexp(x, axis=(0, 2)),
    ),
    "cumsum": ([TensorType((2, 3))], {"axis": 1}, lambda x: np.cumsum(x, axis=1)),
    "cumsum/reverse": (
        [TensorType((3, 2))],
        {"axis": 0, "reverse": True},
        lambda x: np.flip(np.cumsum(np.flip(x, 0), axis=0), 0),
    ),
    "cumprod": ([TensorType((2, 4))], {"axis": -1}, lambda x: np.cumprod(x, axis=-1)),
    "max": ([TensorType((2, 3, 2))], {"axes": [1], "keepdim": True}, lambda x: np.max(x, axis=1, keepdims=True)),
    "min": ([TensorType((2, 3))], {"axes": []}, np.min),
    "prod": ([TensorType((2, 3, 2))], {"axes": [0, 2]}, lambda x: np.prod(x, axis=(0, 2))),
    "topk": ([TensorType((2, 4))], {"k": 2, "axis": 1}, _topk),
    "p_norm": ([TensorType((2, 3))], {"p": 2.0, "axis": 1}, lambda x: np.linalg.norm(x, axis=1)),
    "p_norm/1": (
        [TensorType((2, 3))],
        {"p": 1.0, "axis": 0, "keepdim": True},
        lambda x: np.abs(x).sum(0, keepdims=True),
    ),
    "p_norm/inf": ([TensorType((2, 3))], {"p": float("inf"), "axis": 1}, lambda x: np.abs(x).max(1)),
    "gather": ([TensorType((3, 2)), TensorType((3,), I64)], {"axis": 0}, lambda x, i: np.take(x, i, axis=0)),
    "index_select": ([TensorType((2, 3)), TensorType((2,), I64)], {"axis": 1}, lambda x, i: np.take(x, i, axis=1)),
    "index_add": (
        [TensorType((3, 2)), TensorType((3,), I64), TensorType((3, 2))],
        {"axis": 0},
        lambda x, i, v: _added(x, (i,), v),
    ),
    "take_along_axis": (
        [TensorType((2, 3)), TensorType((2, 4), I64)],
        {"axis": 1},
        lambda x, i: np.take_along_axis(x, i, axis=1),
    ),
    "put_along_axis": (
        [TensorType((2, 3)), TensorType((2, 2), I64), TensorType((2, 2))],
        {"axis": 1},
        lambda x, i, v: _put(x, i, v, add=False),
    ),
    "put_along_axis/add": (
        [TensorType((2, 4)), TensorType((2, 3), I64), TensorType((2, 3))],
        {"axis": 1, "reduce": "add"},
        lambda x, i, v: _put(x, i, v, add=True),
    ),
    "scatter": (
        [TensorType((3, 2)), TensorType((3,), I64), TensorType((3, 2))],
        {},
        lambda x, i, u: _scatter(x, i, u, overwrite=True),
    ),
    "scatter/add": (
        [TensorType((3, 2)), TensorType((3,), I64), TensorType((3, 2))],
        {"overwrite": False},
        lambda x, i, u: _scatter(x, i, u, overwrite=False),
    ),
    "last_occurrence": (
        [TensorType((5,), I64)],
        {"dtype": "f64"},
        lambda i: np.array([0.0, 0.0, 1.0, 1.0, 1.0]),
    ),
    "set_value_with_tensor": (
        [TensorType((2, 4)), TensorType((2, 2))],
        {"axes": [1], "starts": [1], "ends": [3]},
        _set,
    ),
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
    base_ops = {n for n, d in OPS.items() if d.autodiff.base is None}
    assert base_ops - STRUCTURAL == {_op(k) for k in SPECS}, "an op without a kernel test"
    # in-place variants share their base's kernel: tested below against it
    assert all(OPS[n].autodiff.base in OPS for n in OPS if OPS[n].autodiff.base)


def _op(spec: str) -> str:
    """The op a spec tests ("gelu/tanh": gelu, with other attributes)."""
    return spec.split("/")[0]


def _inputs(spec: str, types: list[TensorType], rng: np.random.Generator) -> list[np.ndarray]:
    """Float operands inside the op's domain and MARGIN from its kinks; index operands from INDEX."""
    d = OPS[_op(spec)]
    index = iter(INDEX.get(spec, []))
    attrs = SPECS[spec][1]
    while True:
        out = []
        for i, t in enumerate(types):
            if t.dtype == I64:
                out.append(next(index))
                continue
            lo, hi = d.drawing.domain[i] if i < len(d.drawing.domain) and d.drawing.domain[i] else (-2.0, 2.0)  # type: ignore[misc]
            out.append(rng.uniform(lo, hi, t.shape))
        if (
            d.drawing.kink is None
            or np.min(np.abs(d.drawing.kink(np, *out, **{**d.signature.defaults, **attrs})), initial=1.0) >= 0.05
        ):
            return out
        index = iter(INDEX.get(spec, []))


def _one_op(name: str, types: list[TensorType], attrs: dict[str, Any]):  # type: ignore[no-untyped-def]
    pb = ProgramBuilder()
    xs = [pb.input(f"x{i}", t) for i, t in enumerate(types)]
    out = pb.emit(name, *xs, **attrs)
    return pb.build(*(out if isinstance(out, list) else [out]))


@pytest.mark.parametrize("spec", sorted(SPECS))
@pytest.mark.parametrize("xp", [np, array_api_strict], ids=["numpy", "array_api_strict"])
def test_kernel_matches_numpy(spec: str, xp: Any) -> None:
    types, attrs, ref = SPECS[spec]
    rng = np.random.default_rng(sum(map(ord, spec)))
    xs = _inputs(spec, types, rng)
    got = [to_numpy(g) for g in run(_one_op(_op(spec), types, attrs), [xp.asarray(x) for x in xs], xp=xp).outputs]
    want = ref(*xs)
    for g, w in zip(got, want if isinstance(want, tuple) else [want], strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


# ops whose operand is differentiable: their VJP against finite differences, and their VJP's own
_DIFFERENTIABLE = sorted(
    k for k, (types, _, _) in SPECS.items() if any(OPS[_op(k)].is_differentiable_operand(i) for i in range(len(types)))
)


def _vjp_against_fd(p: Any, xs: list[np.ndarray], seed: int) -> None:
    rng = np.random.default_rng(seed)
    outs = [v for v in p.outputs if is_differentiable(v.type)]
    wrt = [v for v in p.inputs if is_differentiable(v.type)]
    base = [np.asarray(y) for y in run(p, xs).outputs]
    cots = [rng.normal(size=np.shape(b)).astype(b.dtype) for b in (base[p.outputs.index(y)] for y in outs)]
    # (a float32 result rounds the finite differences' two runs to float32)
    rtol = 1e-3 if any(b.dtype == np.float32 for b in base) else 1e-6
    got = compute(p, xs, outs, wrt, cots)
    full = [np.zeros(np.shape(b)) for b in base]
    for y, u in zip(outs, cots):
        full[p.outputs.index(y)] = u
    want, valid = jacobian_vjp(p, xs, [p.inputs.index(v) for v in wrt], full)
    assert valid, "the finite differences crossed a kink"
    for v, g, e in zip(wrt, got.grads, want):
        np.testing.assert_allclose(0.0 if g is None else g, e, rtol=rtol, atol=rtol * 1e-2, err_msg=f"%{v.name}")


@pytest.mark.parametrize("spec", _DIFFERENTIABLE)
def test_vjp_matches_finite_differences(spec: str) -> None:
    types, attrs, _ = SPECS[spec]
    _vjp_against_fd(_one_op(_op(spec), types, attrs), _inputs(spec, types, np.random.default_rng(7)), seed=8)


@pytest.mark.parametrize("spec", _DIFFERENTIABLE)
def test_vjp_of_the_vjp_matches_finite_differences(spec: str) -> None:
    """The rule's own ops are differentiable: second order through every op."""
    from .test_backward import first_order_program

    types, attrs, _ = SPECS[spec]
    q = first_order_program(_one_op(_op(spec), types, attrs))
    if not q.outputs:
        pytest.fail(f"{spec}: no first-order gradient")
    _vjp_against_fd(q, _inputs(spec, types, np.random.default_rng(9)), seed=10)


def test_zeros_in_prod_and_cumprod_take_the_product_of_the_others() -> None:
    """The classic wrong rule, g * out / x, is 0/0 at a zero: the gradient there is the product of
    the other elements, and 0 wherever two elements are 0."""
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]])
    for name, attrs in [("prod", {"axes": [1]}), ("cumprod", {"axis": 1})]:
        p = _one_op(name, [TensorType((2, 3))], attrs)
        (g,) = compute(p, [x], p.outputs, p.inputs, [np.ones((2,) if name == "prod" else (2, 3))]).grads
        assert np.all(np.isfinite(g))
        _vjp_against_fd(p, [x], seed=11)
    p = _one_op("prod", [TensorType((2, 3))], {"axes": [1]})
    (g,) = compute(p, [x], p.outputs, p.inputs, [np.ones(2)]).grads
    np.testing.assert_array_equal(g, [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0]])


def test_a_duplicate_index_accumulates_and_an_overwritten_update_has_no_gradient() -> None:
    x, u = np.zeros((3, 2)), np.arange(6.0).reshape(3, 2)
    i = np.array([2, 0, 2])
    p = _one_op("scatter", [TensorType((3, 2)), TensorType((3,), I64), TensorType((3, 2))], {"overwrite": True})
    gx, gu = compute(p, [x, i, u], p.outputs, [p.inputs[0], p.inputs[2]], [np.ones((3, 2))]).grads
    np.testing.assert_array_equal(gu, [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]])  # the first write to row 2 lost
    np.testing.assert_array_equal(gx, [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    p = _one_op("gather", [TensorType((3, 2)), TensorType((3,), I64)], {"axis": 0})
    (gx,) = compute(p, [x, i], p.outputs, [p.inputs[0]], [np.ones((3, 2))]).grads
    np.testing.assert_array_equal(gx, [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]])


@pytest.mark.parametrize("name", sorted(n for n, d in OPS.items() if d.autodiff.base is not None))
def test_inplace_variant_overwrites_its_operand_with_the_base_result(name: str) -> None:
    d = OPS[name]
    base = d.autodiff.base
    assert base is not None
    types, attrs, _ = SPECS[base]
    if len(types) == 2 and OPS[base].drawing.family != "index":  # (a binary op: an operand of the result's shape)
        types = [types[0], TensorType(types[0].shape)]
    xs = _inputs(base, types, np.random.default_rng(1))
    want = run(_one_op(base, types, attrs), xs).outputs[0]
    from gradcert.reference import Interpreter

    it = Interpreter()
    p = _one_op(name, types, attrs)
    (got,) = it.run(p, xs).outputs
    assert got is it.env[p.inputs[d.autodiff.inplace_of or 0]], "the result must be the operand's own buffer"
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
