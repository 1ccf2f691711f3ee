"""How an area test searches (conformance/judging.py): seeded cases handed to hypothesis, choice for
choice, so that hypothesis replays exactly the failure found and shrinks it; a failure hypothesis
does not see again is reported as found."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from gradcert.backends.protocol import BackendResult
from gradcert.backends.reference import ReferenceBackend
from gradcert.conformance.areas import AREAS
from gradcert.conformance.areas import strategy as case_strategy
from gradcert.conformance.areas import tests as certify_tests
from gradcert.conformance.isolation.runner import InProcess
from gradcert.conformance.judging import Found, Search, _handed, _to_bytes, draw
from gradcert.conformance.oracles import clear
from gradcert.conformance.results import read_records
from gradcert.conformance.session import CaseFailed, Session
from gradcert.generators.case import Case
from gradcert.generators.choices import Seeded, Simplest
from gradcert.generators.features import Features


def area_tests() -> list[Any]:
    return [pytest.param(f, id=test_id.partition("::")[2]) for test_id, f in certify_tests().items()]


def first_replayed(strategy: Any, found: bytes) -> Case:
    got: list[Case] = []

    @settings(database=_handed(found, None), phases=[Phase.reuse], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def first(case: Case) -> None:
        got.append(case)

    first()
    return got[0]


@pytest.mark.parametrize("test", area_tests())
def test_hypothesis_replays_the_seeded_case_choice_for_choice(test: Any) -> None:
    features, order = test._gradcert_features, test._gradcert_area.order
    for seed in range(-1, 15):
        chooser = Seeded(seed) if seed >= 0 else Simplest()
        case = draw(chooser, features, order)
        assert first_replayed(case_strategy(features, order), _to_bytes(chooser.choices)).to_text() == case.to_text()


class FailsOnce(ReferenceBackend):
    """Fails the first case it is given with more than one op; right ever after."""

    name = "fails-once"

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def run(self, case: Case) -> BackendResult:
        r = super().run(case)
        if not self.failed and case.size() > 1:
            self.failed = True
            r.grads = [None if g is None else g + 1 for g in r.grads]
        return r


def session(tmp_path: Path, backend: Any) -> Session:
    s = Session("reference", tmp_path / "r.jsonl", tmp_path / "findings", isolate=False)
    s.spec = s.name = backend.name  # judged against the reference, not as the reference itself
    s.runner = InProcess(backend)
    return s


def test_a_failure_found_is_shrunk_and_one_not_seen_again_is_reported_as_found(tmp_path: Path) -> None:
    from tests.mutants import WrongSinRule

    # (unary ops alone: a case of several ops, every one a candidate for the planted sin)
    spec, features = AREAS["elementwise"], Features(frozenset({"unary"}), 6, 1)
    strategy = case_strategy(features, 1)
    # a big failing case, handed over as the search hands the first one it finds, shrunk under 24
    # shrinker seeds (the test's key seeds it): without a span per step and a final stop flag, 2 of
    # these stopped at 6 ops
    probe = session(tmp_path / "probe", WrongSinRule())
    seed = next(
        k
        for k in range(1000)
        if (c := draw(Seeded(k), features, 1)).size() >= 4 and probe.judge(spec, c).status == "fail"
    )
    for key in range(24):
        s = session(tmp_path / f"a{key}", WrongSinRule())
        chooser = Seeded(seed)
        case = draw(chooser, features, 1)
        v = s.check("t", spec, case)
        assert v.status == "fail" and case.size() >= 4
        sig = s.verdict(spec, case).signature  # (as a defect no derived case shows: shrunk by hypothesis)
        small, said, shrunk = Search(50, True)._shrink(
            s, spec, f"k{key}", strategy, Found(v, case, chooser.choices), sig, None
        )
        s.close()
        assert shrunk and small.size() == 1 and "= sin(%x0)" in small.to_text(), (key, small.to_text())
        assert said.status == "fail" and clear(said)
    # a failure hypothesis does not see again (a backend that fails now and then) is reported as found
    s = session(tmp_path / "b", FailsOnce())
    with pytest.raises(CaseFailed) as found:
        Search(50, True).run(s, "t", spec, features, "k", lambda: strategy)
    s.close()
    records = [r for r in read_records([s.results.path]) if "coverage" not in r]
    # (it failed once, then passed when judged again: nondeterministic, and not shrunk)
    first = next(r for r in records if r["status"] == "nondeterministic" and "defect" not in r)
    defect = next(r for r in records if "defect" in r)
    assert first["size"] > 1 and first["case"].split("---")[0] in str(found.value)
    assert not defect["shrunk"] and defect["case"] == first["case"]


class Recording(Session):
    """A session that keeps every case it is asked to check, as drawn."""

    def check(self, test_id: str, area: Any, case: Case, drawn_s: Any = None, draw: Any = None) -> Any:
        self.seen = [*getattr(self, "seen", []), (draw, replace(case, area=area.name).to_text())]
        return super().check(test_id, area, case, drawn_s, draw)


def test_a_pass_is_recorded_by_its_draw_and_drawn_again_from_it(tmp_path: Path) -> None:
    from gradcert.conformance.areas.test_while import test_while_mixed as test
    from gradcert.conformance.judging import redraw

    s = Recording("reference", tmp_path / "r.jsonl", tmp_path / "f", isolate=False)
    spec, features = test._gradcert_area, test._gradcert_features
    Search(20, True).run(
        s, "test_while.py::test_while_mixed", spec, features, "k", lambda: case_strategy(features, spec.order)
    )
    s.close()
    records = [r for r in read_records([tmp_path / "r.jsonl"]) if "coverage" not in r]
    assert len(records) == 20 and all(r["status"] == "pass" and "case" not in r for r in records)
    assert [r["case_id"] for r in records] == [d for d, _ in s.seen] and records[0]["draw"] == "simplest"
    for r, (_, text) in zip(records, s.seen):
        assert redraw(r["test_id"], r["draw"]).to_text() == text
    with pytest.raises(ValueError, match="not a certification test"):
        redraw("test_while.py::nothing", "simplest")
    with pytest.raises(ValueError, match="not a seeded draw"):
        redraw("test_while.py::test_while_mixed", "7")


def test_a_failure_is_recorded_with_its_text(tmp_path: Path) -> None:
    s = session(tmp_path, FailsOnce())
    test = area_tests()[0].values[0]
    spec, features = test._gradcert_area, test._gradcert_features
    with pytest.raises(CaseFailed):
        Search(50, True, shrink=False).run(s, "t", spec, features, "k", lambda: case_strategy(features, spec.order))
    s.close()
    records = [r for r in read_records([s.results.path]) if "coverage" not in r]
    failed = [r for r in records if r["status"] == "nondeterministic" and "defect" not in r]
    assert len(failed) == 1 and failed[0]["draw"].startswith("seed:") and "---" in failed[0]["case"]
    assert failed[0]["replay"] == f"gradcert replay 't[{failed[0]['draw']}]' --backend fails-once"
    (defect,) = [r for r in records if "defect" in r]
    assert failed[0]["case_id"] in defect["case_file"] and defect["cases"] == 1


def test_each_case_is_freed_at_its_end_not_left_to_a_later_collection(tmp_path: Path) -> None:
    """A case's programs are reference cycles: the search pauses the collector for a case and
    collects them at its end, while they are young (judging.draw_and_check); left to the collector's
    schedule they were found alive mid-case, moved to older generations, and lingered there until
    a rarer full collection. No op of a case judged outlives its case, and nothing the
    reference backend keeps between cases (the request it checked last) holds one."""
    import gc

    from gradcert.conformance.areas.test_while import test_while_mixed as test
    from gradcert.conformance.judging import draw_and_check
    from gradcert.reference.ir import Operation

    def ops() -> int:
        return sum(isinstance(o, Operation) for o in gc.get_objects())

    s = Session("reference", tmp_path / "r.jsonl", tmp_path / "f", isolate=False)
    spec, features = test._gradcert_area, test._gradcert_features
    gc.collect()
    before = ops()
    for k in range(20):  # (each case makes programs: the case's, its backward program, ...)
        draw_and_check(s, "t", spec, features, 1, k)
        assert ops() == before, k
    Search(40, True).run(s, "u", spec, features, "k", lambda: case_strategy(features, spec.order))
    assert gc.isenabled() and len(s.done) == 60 and ops() == before
    gc.disable()  # a collector the caller turned off stays off
    try:
        Search(5, True).run(s, "v", spec, features, "k", lambda: case_strategy(features, spec.order))
        assert not gc.isenabled()
    finally:
        gc.enable()
    s.close()


def test_a_session_holds_each_verdict_not_its_record(tmp_path: Path) -> None:
    """A session remembers every verdict it gave (a case met again is not judged again), for as
    long as it runs: an hour's fuzzing is millions. It holds the verdict, not the record (1.6 kB
    a verdict, then: ~3.5 GB a worker's hour): after as many checks to fill the caches (kernels,
    signatures), 300 more hold under half of that (tracemalloc; bench/memory.py)."""
    import gc
    import tracemalloc

    from gradcert.conformance.judging import draw_and_check

    chosen = [(tid, t._gradcert_area, t._gradcert_features) for tid, t in certify_tests().items()]
    s = Session("reference", tmp_path / "r.jsonl", tmp_path / "f", isolate=False)

    def checks(start: int) -> None:
        for k in range(start, start + 300):
            test_id, area, features = chosen[k % len(chosen)]
            draw_and_check(s, test_id, area, features, 1, k)

    checks(10**6)
    tracemalloc.start()
    per_verdict = []
    try:
        for start in (0, 10**5):  # (twice: a cache that one batch happens to fill is not a verdict's)
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            checks(start)
            gc.collect()
            per_verdict.append((tracemalloc.get_traced_memory()[0] - before) / 300)
    finally:
        tracemalloc.stop()
        s.close()
    assert len(s.done) == 900 and min(per_verdict) < 800, per_verdict
