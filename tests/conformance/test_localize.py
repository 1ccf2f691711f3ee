"""Localization (`gradcert.conformance.localize`): a failing case's culprit, found by derived cases
run through the same backend (planted backends of tests/mutants.py, judged in process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcert.conformance.areas import AREAS
from gradcert.conformance.localize import Cache, localize
from gradcert.conformance.session import Session
from gradcert.generators.case import Case, parse_case

CASE = """{program}
---
{{"format": "gradcert-case/1", "area": "{area}", "seed": null, "outputs": [0], "wrt": [0, 1], "no_grad": [],
 "inputs": [{{"dtype": "float64", "shape": [3], "data": [0.3, -0.7, 0.55]}},
            {{"dtype": "float64", "shape": [3], "data": [0.45, 0.25, -0.6]}}],
 "cotangents": null, "order": {order}, "cotangents2": {c2}}}
"""
C2 = (
    '[{"dtype": "float64", "shape": [3], "data": [0.5, -0.25, 1.0]},'
    ' {"dtype": "float64", "shape": [3], "data": [1.0, 0.5, 0.75]}]'
)

CHAIN = """program(%x0: f64[3], %x1: f64[3]) {
  %0 = tanh(%x0) : f64[3]
  %1 = multiply(%0, %x1) : f64[3]
  %2 = sin(%1) : f64[3]
  %3 = exp(%2) : f64[3]
  %4 = add(%3, %x1) : f64[3]
  %5 = sum(%4) {axes=[], keepdim=false} : f64[]
  return %5
}"""


def case(program: str, area: str = "elementwise", order: int = 1, x0: str = "") -> Case:
    text = CASE.format(program=program, area=area, order=order, c2=C2 if order == 2 else "null")
    return parse_case(text.replace("[0.3, -0.7, 0.55]", x0) if x0 else text)


def judged(backend: str, c: Case, tmp_path: Path) -> tuple[str, Session]:
    s = Session(f"tests.mutants:{backend}", None, tmp_path, isolate=False)
    v = s.judge(AREAS[c.area], c)
    return v.signature, s


def test_a_wrong_rule_is_its_op_and_its_minimal_case_is_that_op_alone(tmp_path: Path) -> None:
    sig, s = judged("WrongSinRule", case(CHAIN), tmp_path)
    assert sig == "op sin | wrong value"
    (cause, v) = s.causes[sig]
    assert [op.name for op in cause.case.program.walk()] == ["sin"] and v.status == "fail"
    assert s.localized[-1][1] and s.localized[-1][0] <= 6  # a few backend calls, on failure only


def test_a_wrong_rule_met_at_second_order_through_another_ops_backward_is_that_rule(tmp_path: Path) -> None:
    # d2 cos = -cos: the backward of cos emits sin, whose rule is wrong
    program = CHAIN.replace("sin(%1)", "cos(%1)")
    sig, _ = judged("WrongSinRule", case(program, "second_order", 2), tmp_path)
    assert sig == "op sin | wrong value"


def test_a_mechanism_any_op_meets_is_named_by_its_use_not_by_an_op(tmp_path: Path) -> None:
    program = CHAIN.replace("multiply(%0, %x1)", "multiply(%0, %0)").replace("add(%3, %x1)", "add(%3, %3)")
    sig, s = judged("RepeatedNotAccumulated", case(program), tmp_path)
    assert sig == "a value read twice by one op | wrong value"
    (cause, _) = s.causes[sig]
    assert cause.case.size() == 1


def test_a_loop_construct_is_named_by_what_its_wrong_inputs_are(tmp_path: Path) -> None:
    program = """program(%x0: f64[3], %x1: f64[3]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %n = full() {dtype=i64, shape=[], value=3.0} : i64[]
  %one = full() {dtype=i64, shape=[], value=1.0} : i64[]
  %i, %h = while(%i0, %x0) : i64[], f64[3] {
  ^cond(%ci: i64[], %ch: f64[3]):
    %go = less_than(%ci, %n) : bool[]
    yield(%go)
  ^body(%bi: i64[], %bh: f64[3]):
    %next = add(%bi, %one) : i64[]
    %m = multiply(%bh, %x1) : f64[3]
    %t = tanh(%m) : f64[3]
    yield(%next, %t)
  }
  %s = sum(%h) {axes=[], keepdim=false} : f64[]
  return %s
}"""
    sig, _ = judged("ForgetLoopAccumulation", case(program, "while"), tmp_path)
    assert sig == "while: a captured value's accumulation across trips | wrong value"


def test_a_failure_no_smaller_part_shows_keeps_where_it_was_met(tmp_path: Path) -> None:
    """A backend wrong only on programs of five ops or more: no derived case fails."""
    sig, s = judged("WrongOnBigPrograms", case(CHAIN), tmp_path)
    assert sig == "unlocalized in elementwise (reference) | wrong value at the top level only"
    assert not s.localized[-1][1]


def test_a_structure_that_passed_before_is_tried_again_where_nothing_else_fails(tmp_path: Path) -> None:
    """tanh's rule wrong only above 0.5, sin's everywhere: a first case (tanh's operands below 0.5)
    fails by sin, and its search finds tanh's structure passing; a second case, sin-free, fails by
    tanh at larger values, and is still localized to tanh."""
    sig, s = judged("WrongSinAndTanhAboveHalf", case(CHAIN, x0="[0.1, 0.2, 0.3]"), tmp_path)
    assert sig == "op sin | wrong value" and s.probes.passed
    c = case(CHAIN.replace("sin(%1)", "cos(%1)"), x0="[0.6, 0.7, 0.9]")
    v = s.judge(AREAS["elementwise"], c)
    assert v.signature == "op tanh | wrong value"


@pytest.mark.parametrize("budget", [0, 1])
def test_a_search_spends_at_most_its_budget(budget: int) -> None:
    calls = []

    def probe(d: Case) -> tuple[str, list[str]]:
        calls.append(d)
        return "", []

    assert localize(case(CHAIN), "wrong value", probe, Cache(), budget) is None
    assert len(calls) <= budget + 0  # (naming spends nothing: nothing was found)
