"""The tensorflow backend, against a real TensorFlow (tensorflow-cpu, installed by the `test`
extra): its gradients agree with the reference on every hand-written program, a quick
certification judges every area and passes against TensorFlow's known defects, and a loop whose
trip count only the graph knows is differentiated at first and second order. The checks it
shares with the torch and jax backends (the lowering against the interpreter, None versus zeros,
the known defects replayed, a wrong gradient planted through `tf.custom_gradient` caught) are in
test_torch_jax.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gradcert.backends.reference import ReferenceBackend
from gradcert.backends.registry import resolve
from gradcert.conformance.areas import AREAS
from gradcert.conformance.defects import known_defects
from gradcert.conformance.oracles import judge
from gradcert.conformance.verdicts import FAILING, LIMIT
from gradcert.generators.case import Case
from gradcert.reference.domains import safe_inputs
from gradcert.reference.ir.loader import load_program

from ..conftest import certify
from .test_torch_jax import PROGRAMS, _case


@pytest.fixture(scope="module")
def backend() -> object:
    return resolve("tensorflow")


def test_gradients_agree_with_the_reference_on_every_program(backend: object) -> None:
    """Every float input differentiated, every output, cotangents ones: judged by every oracle."""
    bad = {}
    for path in PROGRAMS:
        p = load_program(path)
        wrt = [i for i, v in enumerate(p.inputs) if getattr(v.type, "dtype", "") in ("f64", "f32")]
        case = Case(p, safe_inputs(p, 0), list(range(len(p.outputs))), wrt)
        v = judge(case, backend.run(case), ReferenceBackend().run(case))  # type: ignore[attr-defined]
        if v.status not in ("pass", "invalid"):
            bad[path.name] = f"{v.status}: {v.message}"
    assert not bad, bad


def test_quick_certification_passes(tmp_path: Path) -> None:
    r, records = certify("tensorflow", tmp_path, workers="2")
    assert r.returncode == 0, r.stdout[-4000:]
    records = [x for x in records if "case_id" in x and "defect" not in x]
    assert not [x for x in records if x["oracle"] == "lowering"]
    assert {x["area"] for x in records} == set(AREAS)
    # the parameter-list API (Paddle's append_backward) is not expressed: on record as unsupported
    assert {(x["status"], x["oracle"]) for x in records if x["area"] == "append_backward"} == {
        ("unsupported", "capabilities")
    }
    bad = [x for x in records if x["status"] in FAILING]
    assert not bad, [(x["test_id"], x["message"][:200]) for x in bad]
    # every failure is a known defect of TensorFlow's (GradientTape.gradient checks no cotangent
    # shape), met only where a bad request is made
    known = [x for x in records if x["status"] == "known"]
    assert {x["signature"] for x in known} <= set(known_defects("tensorflow"))
    assert {x["area"] for x in known} <= {"bad_requests"}
    # and a second-order no-grad set is the adapter's limit: unsupported, never a defect
    unsupported = [x for x in records if x["status"] == "unsupported" and x["area"] != "append_backward"]
    assert all(x["area"] == "second_order" and x["message"].startswith(LIMIT) for x in unsupported), unsupported
    assert sum(x["status"] == "pass" for x in records) > 300


# A loop whose trip count is computed from the input %x1: `tf.while_loop` in the graph, the trip
# count the graph's, then its second derivative by a tape around the tape.
LOOP = """program(%x0: f64[3], %x1: f64[]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %n = cast(%x1) {dtype=i64} : i64[]
  %i, %h = while(%i0, %x0) : i64[], f64[3] {
  ^cond(%ci: i64[], %ch: f64[3]):
    %go = less_than(%ci, %n) : bool[]
    yield(%go)
  ^body(%bi: i64[], %bh: f64[3]):
    %one = full() {dtype=i64, shape=[], value=1.0} : i64[]
    %ni = add(%bi, %one) : i64[]
    %t = sin(%bh) : f64[3]
    %u = multiply(%t, %x0) : f64[3]
    yield(%ni, %u)
  }
  return %h
}
"""


@pytest.mark.parametrize("order", [1, 2])
def test_a_loop_of_traced_trip_count_first_and_second_order(backend: object, order: int) -> None:
    xs = [np.array([0.1, 0.2, 0.3]), np.array(3.5)]  # three trips, away from a flip
    case = _case(LOOP, [0, 1], xs)
    if order == 2:
        case = replace(case, order=2, cotangents2=[np.array([1.0, -2.0, 0.5])])
    got = backend.run(case)  # type: ignore[attr-defined]
    ref = ReferenceBackend().run(case)
    assert judge(case, got, ref).status == "pass"
    np.testing.assert_allclose(got.grads[0], ref.grads[0], rtol=1e-9)
    assert got.grads[1] is None  # through `cast` to an integer: no differentiable path


GELU = "program(%x0: f64[]) {\n  %0 = gelu(%x0) {approximate=false} : f64[]\n  return %0\n}\n"


def test_tf_nn_gelu_is_off_in_float64_so_gelu_is_lowered_by_its_formula(backend: object) -> None:
    """`tf.nn.gelu` casts its constant 1/sqrt(2) as a float32 constant, in float64 too: its value is
    off by 2.6e-9 relative at 0.234375 (the lowering check allows 1e-9), which would be blamed on
    the adapter; the adapter lowers `gelu` by its formula on `tf.math.erf`, and agrees."""
    import scipy.special

    tf = backend.tf  # type: ignore[attr-defined]
    x = 0.234375
    exact = 0.5 * x * scipy.special.erfc(-x / np.sqrt(2.0))
    assert abs(float(tf.nn.gelu(tf.constant(x, tf.float64))) / exact - 1) > 1e-9
    got = backend.run(_case(GELU, [0], [np.array(x)]))  # type: ignore[attr-defined]
    np.testing.assert_allclose(got.forward[0], exact, rtol=1e-15)
