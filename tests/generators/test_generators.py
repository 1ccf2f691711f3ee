"""Generators: every draw valid and finite, features covered, the fast path deterministic across
processes, cases round-trip through their files, and failures shrink to small programs."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings

from gradcert.conformance.areas import tests as certify_tests
from gradcert.conformance.judging import redraw
from gradcert.conformance.oracles import _setup
from gradcert.generators import FULL, Case, CaseFileError, Features, cases, describe, draw_case, parse_case
from gradcert.generators.features import CONSTRUCTS
from gradcert.reference import run
from gradcert.reference.autodiff.gradients import compute
from gradcert.reference.finite_diff import directional
from gradcert.reference.interpreter import Interpreter
from gradcert.reference.ir.printer import print_program
from gradcert.reference.ir.verifier import verify_all
from gradcert.reference.ops import OPS


def finite(case: Case) -> bool:
    outs = run(case.program, case.inputs).outputs
    g = compute(case.program, case.inputs, case.output_values, case.wrt_values, case.cotangents, case.no_grad)
    arrays = [np.asarray(o) for o in outs] + [x for x in g.grads if x is not None]
    return all(bool(np.all(np.isfinite(a))) for a in arrays)


def test_fast_path_draws_are_valid_and_finite() -> None:
    bad = []
    for seed in range(400):
        c = draw_case(seed)
        if verify_all(c.program) or not finite(c):
            bad.append(seed)
    assert bad == []


@given(cases())
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
def test_hypothesis_draws_are_valid_and_finite(case: Case) -> None:
    assert verify_all(case.program) == []
    assert finite(case)


def _same(a: object, b: object) -> bool:
    if isinstance(a, tuple):  # a vector
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, list):  # a stack (a handle)
        return a is b
    return isinstance(b, np.ndarray) and np.asarray(a).dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("test_id", list(certify_tests()))
def test_the_generators_evaluation_is_the_programs_run(test_id: str) -> None:
    """What finite differences take in place of their unperturbed run (`Case.evaluated`): the
    interpreter's trace of a run of the finished program, and each top-level value as that run
    first computes it (in-place ops overwrite some later), for every certify test's draws."""
    for k in range(12):
        case = redraw(test_id, f"seed:{k:x}" if k else "simplest")
        ran = case.evaluated
        assert ran is not None and ran.of(case.program, case.inputs)
        top = frozenset(r for op in case.program.block.ops for r in op.results)
        it = Interpreter(keep=top)
        trace = it.run(case.program, case.inputs).trace
        assert ran.trace == trace, k
        assert ran.values.keys() >= top
        assert [v for v in top if not _same(it.kept[v][0], ran.values[v])] == [], k


def test_finite_differences_reuse_the_generators_run_only_for_its_program() -> None:
    """The same estimate with the generator's run as without; a case whose inputs or program
    changed makes its own."""
    # a case with values held constant (in the no-grad set, not inputs) and an input to perturb;
    # the generator's run keeps the top level's values: held values there (one in a body has its own run)
    case = next(
        c
        for c in map(draw_case, range(300))
        if c.order == 1
        and _setup(c).free
        and _setup(c).held
        and all(v.block is c.program.block for v in _setup(c).held)
    )
    s = _setup(case)
    assert s.base.trace is case.evaluated.trace  # type: ignore[union-attr]
    alone = _setup(replace(case, evaluated=None))
    assert alone.base.trace == s.base.trace and alone.base.held.keys() == s.base.held.keys() == s.held
    assert all(_same(alone.base.held[v][0], s.base.held[v][0]) for v in s.held)
    direction = [np.ones_like(x) for x in case.inputs]
    with_it = directional(s.program, s.inputs, direction, s.cotangents, s.held, base=s.base)
    without = directional(s.program, s.inputs, direction, s.cotangents, s.held)
    assert (with_it.value, with_it.valid) == (without.value, without.valid)
    moved = replace(case, inputs=[x + 0.5 for x in case.inputs])
    assert _setup(moved).base.trace is not case.evaluated.trace  # type: ignore[union-attr]


def test_finite_differences_reuse_the_generators_first_order_program_only_for_its_request() -> None:
    """A second-order case's first-order program, as the generator made it: the same estimate with
    it as without; a case asking with other cotangents makes its own."""
    test_id = next(t for t, f in certify_tests().items() if f._gradcert_area.order == 2)  # type: ignore[attr-defined]
    case = next(c for c in (redraw(test_id, f"seed:{k:x}") for k in range(50)) if _setup(c).free)
    assert case.first_order is not None
    s, alone = _setup(case), _setup(replace(case, first_order=None))
    assert s.program is case.first_order.program and alone.program is not s.program
    assert print_program(alone.program) == print_program(s.program)
    rng = np.random.default_rng(0)
    direction = [rng.normal(size=np.shape(x)) for x in s.inputs]
    with_it = directional(s.program, s.inputs, direction, s.cotangents, s.held, base=s.base)
    without = directional(alone.program, alone.inputs, direction, alone.cotangents, alone.held, base=alone.base)
    assert (with_it.value, with_it.valid) == (without.value, without.valid)
    other = replace(case, cotangents=[np.ones(v.type.shape) for v in case.output_values])  # type: ignore[union-attr]
    assert _setup(other).program is not s.program


def test_every_feature_appears_in_at_least_5_percent_of_draws() -> None:
    n = 400
    seen: Counter[str] = Counter()
    for seed in range(n):
        seen.update(describe(draw_case(seed)))
    expected = {"unary", "binary", "reduction", "matmul", "shape", "vector", "misc"} | CONSTRUCTS
    low = {f: seen[f] / n for f in expected if seen[f] / n < 0.05}
    assert low == {}


def test_same_seed_same_case_byte_for_byte_across_processes() -> None:
    code = "from gradcert.generators import draw_case; print(draw_case(1234).to_text(), end='')"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert other == draw_case(1234).to_text()
    assert draw_case(1234).to_text() != draw_case(1235).to_text()


def test_case_file_round_trip() -> None:
    for seed in range(30):
        c = draw_case(seed)
        text = c.to_text()
        back = parse_case(text)
        assert back.to_text() == text
        for a, b in zip(c.inputs, back.inputs):
            assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize(
    "mangle, words",
    [
        (lambda t: t.replace("---\n", ""), "no '---' line"),
        (lambda t: t.replace('"format"', '"fmt"'), "not a gradcert-case/1 file"),
        (lambda t: t.replace('"wrt"', '"wrong"'), "lacks or misnames 'wrt'"),
        (lambda t: t.replace("program(", "program(("), "expected a parameter"),
        (lambda t: t[: t.index("---")] + "---\n{nope", "bad request JSON"),
    ],
)
def test_malformed_case_files_name_the_problem(mangle, words) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CaseFileError, match=words):
        parse_case(mangle(draw_case(3).to_text()), "c.case")


def test_features_narrow_by_capabilities() -> None:
    f = FULL.narrow({"if", "inplace"})
    assert "while" not in f.enabled and "if" in f.enabled and "vector" not in f.enabled
    for seed in range(60):
        names = {op.name for op in draw_case(seed, f).program.walk()}
        assert "while" not in names and "combine" not in names and "unbind" not in names


def test_required_features_are_always_on() -> None:
    f = Features(required=frozenset({"while"}), max_depth=1)
    assert all("while" in describe(draw_case(seed, f)) for seed in range(40))


def _inplace_fed_by_fanout_in_loop(case: Case) -> bool:
    for op in case.program.walk():
        if op.name != "while":
            continue
        for u in op.blocks[1].walk():
            k = OPS[u.name].autodiff.inplace_of
            if k is not None and len(u.operands[k].uses) >= 2:
                return True
    return False


def test_planted_failure_shrinks_to_a_small_program() -> None:
    """A planted bug ("fails whenever a while body holds an in-place op fed by a fan-out value")
    shrinks to at most 9 ops (constants and terminators not counted; a loop body's yield keeps
    its contraction and squash)."""
    f = Features(max_depth=2)
    minimal = find(
        cases(f),
        _inplace_fed_by_fanout_in_loop,
        settings=settings(max_examples=2000, database=None, derandomize=True, suppress_health_check=list(HealthCheck)),
    )
    assert _inplace_fed_by_fanout_in_loop(minimal)
    assert minimal.size() <= 9, minimal.to_text()
