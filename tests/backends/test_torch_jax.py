"""The torch and jax backends (and, where the check is shared, tensorflow's), against a real
PyTorch, JAX and TensorFlow (installed by the `test` extra): the lowering agrees with the reference
interpreter on every hand-written program, a quick certification of every area they can express
passes, and the contract mapping (None versus zeros, refused in-place ops, loops JAX cannot
reverse) holds on minimal programs."""

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
from gradcert.generators.case import Case, load_case
from gradcert.reference import run
from gradcert.reference.domains import safe_inputs
from gradcert.reference.ir.loader import load_program
from gradcert.reference.ir.parser import parse_program

from ..conftest import EXAMPLES, ROOT, certify, run_cli

PROGRAMS = sorted((ROOT / "tests" / "programs").glob("*.gc")) + EXAMPLES
BACKENDS = ["torch", "jax"]
# the checks every eager or functional framework's adapter shares (the known defects replayed, the
# lowering, the None-versus-zeros mapping) run on TensorFlow's too; its own: test_tensorflow.py
MAPPED = [*BACKENDS, "tensorflow"]


@pytest.mark.parametrize(
    "name,sig",
    [(b, sig) for b in MAPPED for sig in known_defects(b)],
    ids=lambda x: x.replace(" | ", "-").replace(" ", "_")[:40],
)
def test_known_framework_defect_still_fails(name: str, sig: str, tmp_path: Path) -> None:
    """Each known defect's minimal case (known/<backend>.toml) still fails with its signature."""
    d = known_defects(name)[sig]
    r = run_cli("replay", str(KNOWN / d.case), "--backend", name, "--findings", str(tmp_path))
    assert r.returncode == 1 and f"signature: {sig}\n" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "verdict: known" in r.stdout


def test_every_known_framework_case_is_cited() -> None:
    for b in MAPPED:
        cited = {(KNOWN / d.case).resolve() for d in known_defects(b).values()}
        assert cited == {c.resolve() for c in (KNOWN / b).glob("*.case")}, b


@pytest.fixture(scope="module", params=MAPPED)
def backend(request: pytest.FixtureRequest) -> object:
    return resolve(request.param)


def _case(text: str, wrt: list[int], xs: list[np.ndarray] | None = None) -> Case:
    p = parse_program(text)
    return Case(p, xs if xs is not None else safe_inputs(p, 0), list(range(len(p.outputs))), wrt)


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


@pytest.mark.parametrize("name", BACKENDS)
def test_quick_certification_passes(name: str, tmp_path: Path) -> None:
    # torch's run also goes through pytest-xdist (2 workers), as `certify --workers 2` does
    r, records = certify(name, tmp_path, workers="2" if name == "torch" else "1")
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
    # every failure is a known defect: refused only where the framework documents a refusal
    # (PyTorch's in-place checks, JAX's loops whose trip count is staged)
    assert {x["signature"] for x in records if x["status"] == "known"} <= set(known_defects(name))
    # and JAX's adapter cannot say a second-order no-grad set: its limit, unsupported, never a defect
    unsupported = [x for x in records if x["status"] == "unsupported" and x["area"] != "append_backward"]
    assert all(x["area"] == "second_order" and x["message"].startswith(LIMIT) for x in unsupported), unsupported
    assert name == "jax" or not unsupported
    assert sum(x["status"] == "pass" for x in records) > 300


# An input used only in the branch not taken: PyTorch's autograd never sees it (None), JAX gives
# zeros; the program has a path, so the contract's answer is a zero gradient.
UNTAKEN = """
program(%x0: f64[3], %x1: f64[3]) {
  %z = full() {dtype=f64, shape=[], value=0.0} : f64[]
  %s = sum(%x0) {axes=[], keepdim=false} : f64[]
  %c = greater_than(%s, %z) : bool[]
  %y = if(%c) : f64[3] {
  ^then:
    %a = tanh(%x0) : f64[3]
    yield(%a)
  ^else:
    %b = sin(%x1) : f64[3]
    yield(%b)
  }
  return %y
}
"""

# %x1 reaches the output only through `sign`, whose derivative is zero: no differentiable path.
SIGN_ONLY = """
program(%x0: f64[3], %x1: f64[3]) {
  %s = sign(%x1) : f64[3]
  %y = multiply(%x0, %s) : f64[3]
  return %y
}
"""


def test_untaken_branch_input_gets_zeros_not_none(backend: object) -> None:
    case = _case(UNTAKEN, [0, 1], [np.array([0.5, 0.2, 0.1]), np.array([0.3, -0.4, 0.9])])
    got = backend.run(case)  # type: ignore[attr-defined]
    g0, g1 = got.grads
    assert g1 is not None and not np.any(g1)
    np.testing.assert_allclose(g0, 1 - np.tanh([0.5, 0.2, 0.1]) ** 2)
    ref = ReferenceBackend().run(case)
    assert judge(case, got, ref).status == "pass"


def test_input_through_a_zero_derivative_only_gets_none(backend: object) -> None:
    case = _case(SIGN_ONLY, [0, 1], [np.array([0.5, 0.2, 0.1]), np.array([0.3, -0.4, 0.9])])
    g0, g1 = backend.run(case).grads  # type: ignore[attr-defined]
    assert g1 is None
    np.testing.assert_allclose(g0, [1.0, -1.0, 1.0])


INPLACE_ON_INPUT = """
program(%x0: f64[3]) {
  %a = sin_(%x0) : f64[3]
  return %a
}
"""


def test_torch_clones_an_input_it_overwrites_in_place_and_differentiates_it() -> None:
    # (PyTorch forbids writing a leaf that requires grad in place: the adapter clones it first,
    # as a user does, and the gradient flows through the clone)
    torch = resolve("torch")
    case = _case(INPLACE_ON_INPUT, [0])
    got = torch.run(case)
    assert judge(case, got, ReferenceBackend().run(case)).status in ("pass", "invalid")
    # not differentiated: the in-place op runs and overwrites, as the program says
    got = torch.run(_case(INPLACE_ON_INPUT, [], [np.array([0.1, 0.2, 0.3])]))
    np.testing.assert_allclose(got.forward[0], np.sin([0.1, 0.2, 0.3]))


# A loop whose bound is computed from the input %x1. At the top level `jax.vjp` traces eagerly, so
# the bound is a concrete value and the loop's trip count is known; inside a branch of `lax.cond`
# it is abstract, and JAX cannot reverse `lax.while_loop`: the `if` becomes Python control flow.
LOOP = """
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %n = cast(%x1) {dtype=i64} : i64[]
  %i, %h = while(%i0, %x0) : i64[], f64[3] {
  ^cond(%ci: i64[], %ch: f64[3]):
    %go = less_than(%ci, %n) : bool[]
    yield(%go)
  ^body(%bi: i64[], %bh: f64[3]):
    %one = full() {dtype=i64, shape=[], value=1.0} : i64[]
    %ni = add(%bi, %one) : i64[]
    %t = tanh(%bh) : f64[3]
    yield(%ni, %t)
  }
"""
TOP_LEVEL_BOUND = "program(%x0: f64[3], %x1: f64[]) {" + LOOP + "  return %h\n}\n"
BOUND_IN_BRANCH = (
    "program(%x0: f64[3], %x1: f64[], %c: bool[]) {\n  %y = if(%c) : f64[3] {\n  ^then:"
    + LOOP
    + "    yield(%h)\n  ^else:\n    yield(%x0)\n  }\n  return %y\n}\n"
)


def test_jax_loop_trip_count_known_when_tracing() -> None:
    jax, ref = resolve("jax"), ReferenceBackend()
    xs = [np.array([0.1, 0.2, 0.3]), np.array(3.5)]  # three trips, away from a flip
    case = _case(TOP_LEVEL_BOUND, [0, 1], xs)
    got = jax.run(case)
    assert judge(case, got, ref.run(case)).status == "pass"
    assert got.grads[1] is None  # through `cast` to an integer: no differentiable path


@pytest.mark.parametrize("spec", ["jax", "jax-eager", "jax-jit"])
@pytest.mark.parametrize("program", [TOP_LEVEL_BOUND, BOUND_IN_BRANCH], ids=["top", "in_branch"])
def test_jax_loop_bound_from_an_input_is_judged_on_every_path(spec: str, program: str) -> None:
    """Staged, the bound is abstract under `jax.jit`, and inside `lax.cond` on every path: the case
    runs eagerly, the branch taken as Python control flow, and is judged alike, either branch."""
    xs = [np.array([0.1, 0.2, 0.3]), np.array(3.5)]
    for c in [[np.array(True)], [np.array(False)]] if program is BOUND_IN_BRANCH else [[]]:
        case = _case(program, [0, 1], [*xs, *c])
        got = resolve(spec).run(case)
        assert judge(case, got, ReferenceBackend().run(case)).status == "pass", c
        np.testing.assert_allclose(got.grads[0], ReferenceBackend().run(case).grads[0])


# the same loop with a constant bound, then an `if` on a predicate computed from an input: both
# can be staged
CONSTANT_BOUND = (
    "program(%x0: f64[3], %x1: f64[]) {"
    + LOOP.replace("%n = cast(%x1) {dtype=i64} : i64[]", "%n = full() {dtype=i64, shape=[], value=3.0} : i64[]")
    + """  %z = less_than(%x1, %x1) : bool[]
  %y = if(%z) : f64[3] {
  ^then:
    yield(%h)
  ^else:
    %s = sin(%h) : f64[3]
    yield(%s)
  }
  return %y
}
"""
)


@pytest.mark.parametrize(
    "spec, program, staged",
    [
        ("jax", CONSTANT_BOUND, True),  # control flow staged: `lax.cond` and a `scan` certified
        ("jax-eager", CONSTANT_BOUND, True),
        ("jax", TOP_LEVEL_BOUND, False),  # staging cannot express it: Python control flow, eagerly
        ("jax-eager", TOP_LEVEL_BOUND, True),  # `fori_loop` eagerly
    ],
    ids=["jax-constant", "eager-constant", "jax-traced", "eager-traced"],
)
def test_jax_control_flow_primitives_each_path_certifies(
    spec: str, program: str, staged: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docs/torch-jax.md says each path runs: JAX's own `lax.cond` and `fori_loop` (spied on,
    never replaced) complete where the path keeps them, and the gradients are right either way."""
    import jax

    done: list[str] = []
    for name in ("cond", "fori_loop"):
        real = getattr(jax.lax, name)

        def spy(*a: object, _real: object = real, _name: str = name, **k: object) -> object:
            out = _real(*a, **k)  # type: ignore[operator]
            done.append(_name)
            return out

        monkeypatch.setattr(jax.lax, name, spy)
    case = _case(program, [0, 1], [np.array([0.1, 0.2, 0.3]), np.array(3.5)])
    got = resolve(spec).run(case)
    assert judge(case, got, ReferenceBackend().run(case)).status == "pass"
    assert ("fori_loop" in done) is staged, done
    assert ("cond" in done) is (staged and program is CONSTANT_BOUND), done


def test_jax_paths_agree_on_maximum_where_its_mask_compares_a_recomputed_value() -> None:
    """JAX's gradient of `maximum` is a mask of `max(a, b) == a`; XLA compiled with its backend
    optimisations and fusion emitters off computed `a` twice with different rounding, and the
    staged gradient lost the third element (0 where 0.405). With JAX's own flags, both paths agree
    with the reference."""
    case = load_case(ROOT / "tests" / "cases" / "maximum_tie_mask_recomputed.case")
    ref = ReferenceBackend().run(case)
    for spec in ("jax", "jax-eager", "jax-jit"):
        got = resolve(spec).run(case)
        assert judge(case, got, ref).status == "pass", spec


@pytest.mark.parametrize("mutant", ["TorchTanhOff", "JaxTanhOff", "TensorflowTanhOff"])
def test_a_wrong_framework_gradient_is_caught(mutant: str, tmp_path: Path) -> None:
    r, _ = certify(f"tests.framework_mutants:{mutant}", tmp_path, extra=["--areas", "elementwise"])
    assert r.returncode == 1, r.stdout[-2000:]
    assert f"NEW {mutant_name(mutant)}: op tanh | wrong value" in r.stdout, r.stdout[-2000:]
    # the shrunk case is a single tanh
    saved = list((tmp_path / "findings").glob("*/*.case"))
    assert saved and any(p.read_text().count("tanh(") == 1 for p in saved)


def mutant_name(mutant: str) -> str:
    return {
        "TorchTanhOff": "torch-tanh-off",
        "JaxTanhOff": "jax-tanh-off",
        "TensorflowTanhOff": "tensorflow-tanh-off",
    }[mutant]


def test_a_zero_second_order_gradient_from_torch_is_zeros_not_an_error() -> None:
    """PyTorch's second order through a zero-trip loop over `abs` returns a ZeroTensor, which
    `.numpy()` refuses (found by certify's `test_second_order_flow`)."""
    from dataclasses import replace

    text = (
        "program(%x0: f64[2]) {\n  %a = abs(%x0) : f64[2]\n  %one = full() {dtype=i64, shape=[], value=1.0} : i64[]\n"
        "  %i = full() {dtype=i64, shape=[], value=0.0} : i64[]\n  %j, %h = while(%i, %a) : i64[], f64[2] {\n"
        "  ^cond(%ci: i64[], %ch: f64[2]):\n    %go = less_than(%ci, %i) : bool[]\n    yield(%go)\n"
        "  ^body(%bi: i64[], %bh: f64[2]):\n    %t = tanh(%bh) : f64[2]\n    %ni = add(%bi, %one) : i64[]\n"
        "    yield(%ni, %t)\n  }\n  return %h\n}\n"
    )
    case = replace(_case(text, [0], [np.array([-0.5, 0.25])]), order=2, cotangents2=[np.array([1.0, 2.0])])
    assert judge(case, resolve("torch").run(case), ReferenceBackend().run(case)).status == "pass"


@pytest.mark.parametrize("path", ["second_order_no_grad_top.case", "second_order_no_grad_in_loop.case"])
def test_a_no_grad_set_belongs_to_the_first_backward_only(path: str) -> None:
    """The second derivative follows the no-grad set's values (they still depend on the inputs):
    PyTorch's twin-input mapping agrees with the reference, which agrees with finite differences of
    the first derivative; JAX refuses the request, with the reason (a stop there stops every order)."""
    case = load_case(ROOT / "tests" / "cases" / path)
    ref = ReferenceBackend(listing=False).run(case)
    assert judge(case, ref, ref).status == "pass"
    got = resolve("torch").run(case)
    assert judge(case, got, ref).status == "pass"
    detached = resolve("torch").run(replace(case, order=1, cotangents2=None))  # the first order stops there
    assert detached.grads[0] is not None and not np.allclose(got.grads[0], 0)
    with pytest.raises(Unsupported, match="no-grad set at second order"):
        resolve("jax").run(case)


def test_an_in_place_op_on_a_split_element_leaves_the_tensor_combined_alone() -> None:
    case = _case(
        """program(%x0: f32[3]) {
          %0 = sin(%x0) : f32[3]
          %1 = combine(%0, %0) : vec<f32[3], f32[3]>
          %2, %3 = split(%1) : f32[3], f32[3]
          %4 = tanh_(%2) : f32[3]
          %5 = cos(%0) : f32[3]
          return %5, %4
        }""",
        [0],
        [np.array([0.5, -1.0, 2.0], dtype=np.float32)],
    )
    got = resolve("torch").run(case)
    assert np.allclose(got.forward[0], np.cos(np.sin(case.inputs[0])), rtol=1e-6)


def test_jax_cache_folder_keeps_its_most_recently_used_files(tmp_path: Path) -> None:
    """Past its cap the folder is trimmed, least recently used first, to 80% of the cap; under the
    cap nothing is touched."""
    import os

    from gradcert.backends.jax import trim_cache

    for k in range(10):  # file k used at time 1000 + k, 100 bytes each
        f = tmp_path / f"entry{k}-cache"
        f.write_bytes(bytes(100))
        os.utime(f, (1000 + k, 1000 + k))
    assert trim_cache(tmp_path, keep=1000) == 0
    assert len(list(tmp_path.iterdir())) == 10
    assert trim_cache(tmp_path, keep=500) == 600
    assert sorted(f.name for f in tmp_path.iterdir()) == [f"entry{k}-cache" for k in range(6, 10)]
