"""The tensorflow backend, against a real TensorFlow (tensorflow-cpu, installed by the `test`
extra): the lowering agrees with the reference interpreter on every hand-written program, a quick
certification judges every area and passes against TensorFlow's known defects, a wrong gradient
planted through `tf.custom_gradient` is caught, and the contract mapping (None versus zeros) holds
on minimal programs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gradcert.backends.protocol import BackendResult, Unsupported
from gradcert.backends.reference import ReferenceBackend
from gradcert.backends.registry import resolve
from gradcert.conformance.areas import AREAS
from gradcert.conformance.defects import KNOWN, known_defects
from gradcert.conformance.oracles import judge, lowering
from gradcert.conformance.verdicts import FAILING, LIMIT
from gradcert.generators.case import Case
from gradcert.reference import run
from gradcert.reference.domains import safe_inputs
from gradcert.reference.ir.loader import load_program
from gradcert.reference.ir.parser import parse_program

from ..conftest import certify, run_cli
from .test_torch_jax import PROGRAMS, SIGN_ONLY, UNTAKEN


@pytest.fixture(scope="module")
def backend() -> object:
    return resolve("tensorflow")


def _case(text: str, wrt: list[int], xs: list[np.ndarray]) -> Case:
    p = parse_program(text)
    return Case(p, xs, list(range(len(p.outputs))), wrt)


def test_lowering_agrees_with_the_interpreter_on_every_program(backend: object) -> None:
    wrong = {}
    for path in PROGRAMS:
        p = load_program(path)
        xs = safe_inputs(p, 0)
        case = Case(p, xs, [], [])
        ref = [np.asarray(y) for y in run(p, xs).outputs]
        try:
            got = backend.run(case)  # type: ignore[attr-defined]
        except Unsupported as e:
            wrong[path.name] = f"unsupported: {e}"
            continue
        v = lowering(case, got, BackendResult([], forward=ref))
        if v is not None:
            wrong[path.name] = v.message
    assert not wrong, wrong


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


@pytest.mark.parametrize("sig", list(known_defects("tensorflow")), ids=lambda s: s.replace(" ", "_")[:40])
def test_known_tensorflow_defect_still_fails(sig: str, tmp_path: Path) -> None:
    """Each known defect's minimal case (known/tensorflow.toml) still fails with its signature."""
    d = known_defects("tensorflow")[sig]
    r = run_cli("replay", str(KNOWN / d.case), "--backend", "tensorflow", "--findings", str(tmp_path))
    assert r.returncode == 1 and f"signature: {sig}\n" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "verdict: known" in r.stdout


def test_every_known_tensorflow_case_is_cited() -> None:
    cited = {(KNOWN / d.case).resolve() for d in known_defects("tensorflow").values()}
    assert cited == {c.resolve() for c in (KNOWN / "tensorflow").glob("*.case")}


def test_a_wrong_tensorflow_gradient_is_caught(tmp_path: Path) -> None:
    r, _ = certify("tests.framework_mutants:TensorflowTanhOff", tmp_path, extra=["--areas", "elementwise"])
    assert r.returncode == 1, r.stdout[-2000:]
    assert "NEW tensorflow-tanh-off: op tanh | wrong value" in r.stdout, r.stdout[-2000:]
    # the shrunk case is a single tanh
    saved = list((tmp_path / "findings").glob("*/*.case"))
    assert saved and any(p.read_text().count("tanh(") == 1 for p in saved)


def test_untaken_branch_input_gets_zeros_not_none(backend: object) -> None:
    # (cond_v2's gradient holds both branches: TensorFlow gives the input read only in the branch
    # not taken zeros, and the program has a path from it, so zeros are the contract's answer too)
    case = _case(UNTAKEN, [0, 1], [np.array([0.5, 0.2, 0.1]), np.array([0.3, -0.4, 0.9])])
    got = backend.run(case)  # type: ignore[attr-defined]
    g0, g1 = got.grads
    assert g1 is not None and not np.any(g1)
    np.testing.assert_allclose(g0, 1 - np.tanh([0.5, 0.2, 0.1]) ** 2)
    assert judge(case, got, ReferenceBackend().run(case)).status == "pass"


def test_input_through_a_zero_derivative_only_gets_none(backend: object) -> None:
    case = _case(SIGN_ONLY, [0, 1], [np.array([0.5, 0.2, 0.1]), np.array([0.3, -0.4, 0.9])])
    g0, g1 = backend.run(case).grads  # type: ignore[attr-defined]
    assert g1 is None
    np.testing.assert_allclose(g0, [1.0, -1.0, 1.0])


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
