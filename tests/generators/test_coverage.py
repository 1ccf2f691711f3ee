"""The interaction-coverage model (`generators/coverage.py`) on hand-written programs, and what the
certify profile's draws reach of it."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from gradcert.generators import Case
from gradcert.generators.coverage import CELLS, REACHABLE, Tally, events, pairs, unreachable_pairs
from gradcert.reference.ir.loader import parse_source

LOOP = """program(%x: f64[2,3], %b: f64[3]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %n = full() {dtype=i64, shape=[], value=5.0} : i64[]
  %s = sum(%x) {axes=[], keepdim=false} : f64[]
  %i, %h = while(%i0, %x) : i64[], f64[2,3] {
  ^cond(%ci: i64[], %ch: f64[2,3]):
    %go = less_than(%ci, %n) : bool[]
    yield(%go)
  ^body(%bi: i64[], %bh: f64[2,3]):
    %one = full() {dtype=i64, shape=[], value=1.0} : i64[]
    %ni = add(%bi, %one) : i64[]
    %frozen = multiply(%bh, %b) : f64[2,3] stop_gradient
    %m = tanh(%frozen) : f64[2,3]
    yield(%ni, %m)
  }
  %t = tanh_(%h) : f64[2,3]
  return %t, %s
}
"""

DATA = """program(%x: f64[]) {
  %i0 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %lim = full() {dtype=f64, shape=[], value=2.5} : f64[]
  %step = full() {dtype=f64, shape=[], value=1.0} : f64[]
  %i, %t = while(%i0, %x) : i64[], f64[] {
  ^cond(%ci: i64[], %ct: f64[]):
    %go = less_than(%ct, %lim) : bool[]
    yield(%go)
  ^body(%bi: i64[], %bt: f64[]):
    %one = full() {dtype=i64, shape=[], value=1.0} : i64[]
    %ni = add(%bi, %one) : i64[]
    %nt = add(%bt, %step) : f64[]
    yield(%ni, %nt)
  }
  return %t
}
"""


def case_of(text: str, no_grad: tuple[str, ...] = ()) -> Case:
    p = parse_source(text)
    inputs = [np.zeros(v.type.shape) for v in p.inputs]  # type: ignore[union-attr]
    named = {v.name: v for op in p.walk() for v in op.results}
    return Case(p, inputs, [0], list(range(len(p.inputs))), None, [named[n] for n in no_grad])


def test_each_op_is_one_event_of_its_kind_context_rank_trips_and_flags() -> None:
    got = set(events(case_of(LOOP, no_grad=("m",))))
    assert frozenset({"op:input", "ctx:top", "rank:2", "dtype:f64", "fanout"}) in got  # read by sum and the loop
    assert frozenset({"op:input", "ctx:top", "rank:1", "dtype:f64"}) in got
    assert frozenset({"op:reduction", "ctx:top", "rank:2", "dtype:f64"}) in got
    assert frozenset({"op:while", "ctx:top", "trips:4-8"}) in got
    # in the body: a broadcasting multiply marked stop_gradient, a tanh whose result is in the no-grad set
    body = {"ctx:while", "rank:2", "dtype:f64", "trips:4-8"}
    assert frozenset({"op:binary", *body, "broadcast", "stop_gradient"}) in got
    assert frozenset({"op:unary", *body, "no_grad"}) in got
    assert frozenset({"op:unary", "ctx:top", "rank:2", "dtype:f64", "inplace"}) in got
    # the loop's counter arithmetic and condition are no events (integer ops, a compare)
    assert len(got) == 7


def test_pairs_are_the_reachable_pairs_within_one_event() -> None:
    hit = pairs(case_of(LOOP))
    assert ("ctx:while", "stop_gradient") in hit and ("broadcast", "trips:4-8") in hit
    assert ("inplace", "op:unary") in hit and ("ctx:top", "inplace") in hit
    # co-occurring in the case, never in one op: not a pair
    assert ("ctx:while", "inplace") not in hit and ("op:reduction", "trips:4-8") not in hit
    assert hit <= REACHABLE


def test_a_float_condition_makes_a_data_dependent_trip_count() -> None:
    assert frozenset({"op:while", "ctx:top", "trips:data"}) in set(events(case_of(DATA)))
    zero = LOOP.replace("value=5.0", "value=0.0")
    assert frozenset({"op:while", "ctx:top", "trips:0"}) in set(events(case_of(zero)))


def test_every_pair_is_reachable_or_unreachable_with_a_reason() -> None:
    never = unreachable_pairs()
    dims = {c.split(":")[0] for c in CELLS}
    assert len(dims) == 11
    for a, b in combinations(sorted(CELLS), 2):
        if a.split(":")[0] != b.split(":")[0]:
            assert ((a, b) in REACHABLE) != ((a, b) in never), (a, b)
    assert ("op:matmul", "rank:3") in never and ("op:matmul", "rank:2") in REACHABLE
    assert ("inplace", "op:shape") in never and ("ctx:depth3", "op:while") in REACHABLE
    assert all(never.values())


def test_a_tally_adds_up_and_round_trips_through_json() -> None:
    t = Tally()
    t.add(case_of(LOOP))
    t.add(case_of(LOOP))
    back = Tally.from_json(t.to_json())
    assert back.pairs == t.pairs and back.cases == 2
    assert t.novelty(pairs(case_of(DATA))) > t.novelty(pairs(case_of(LOOP)))
    assert f"/{len(REACHABLE)} reachable pairs" in t.summary() and "unreached:" in t.summary()


def test_the_certify_profiles_draws_reach_99_percent_of_the_reachable_pairs() -> None:
    from gradcert.conformance.judging import drawn

    t = Tally()
    for case in drawn(250):
        t.add(case)
    assert t.share() >= 0.99, t.summary()
