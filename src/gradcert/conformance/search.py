"""How an area test looks for a failing case: drawn fast, shrunk by hypothesis.

Cases are drawn by the seeded generator (`Seeded`: a few hundred microseconds a case, where
hypothesis's engine takes milliseconds for the same draw: most of a check's time on a fast backend,
bench/overhead.py). The seeded chooser keeps its choices as hypothesis records them, so the first
failing case is handed to hypothesis through its example database, the way it takes a failure from
an external fuzzer (`fuzz_one_input` saves it as a "secondary" example): hypothesis replays it,
shrinks it with every step judged by the session, and reports the smallest. Hypothesis's persistent
database (nightly) is replayed before anything new is drawn, so an earlier night's failure comes
first.

The hand-over uses hypothesis's database format (`hypothesis.database.choices_to_bytes`) and its
"secondary" examples, as `fuzz_one_input` does: tested with hypothesis 6.155 and 6.170
(`tests/test_search.py` replays a seeded case of every area test choice for choice).
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
import unittest
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from .. import collector
from ..generators.build import Generator
from ..generators.case import Case
from ..generators.choices import Chooser, Seeded, Simplest
from ..generators.features import Features
from ..generators.second_order import second_order
from .areas import Area, tests
from .session import CaseFailed, Session


@dataclass(frozen=True)
class Search:
    examples: int  # cases drawn per test
    derandomize: bool  # the same cases every run (seeds from the test's key)
    shrink: bool = True
    db: str | None = None  # hypothesis's persistent example database (a folder)
    shrink_known: bool = True  # shrink a known failure's (an xfail test's) too

    def known(self) -> Search:
        """The search for a test that is a known failure."""
        return self if self.shrink_known else replace(self, shrink=False)

    def run(
        self, session: Session, test_id: str, area: Area, features: Features, key: str, strategy: Callable[[], Any]
    ) -> None:
        """Judge up to `examples` cases of `features`; raise the first failure, shrunk.

        `strategy()` makes the hypothesis strategy that draws the same cases as `Seeded` from the
        same choices (made only to shrink or replay: hypothesis takes 0.2 s to import); `key` tells
        this test's seeds and database entries from every other test's."""
        store = None
        if self.db:
            from hypothesis.database import DirectoryBasedExampleDatabase

            store = DirectoryBasedExampleDatabase(self.db)
            self._hypothesis(session, test_id, area, key, strategy(), _handed(None, store))
        failure, choices = self._explore(session, test_id, area, features, key)
        if failure is None:
            return
        if self.shrink:
            self._hypothesis(session, test_id, area, key, strategy(), _handed(_to_bytes(choices), store))
        raise failure  # hypothesis did not see it fail again (a backend that fails now and then)

    def _explore(
        self, session: Session, test_id: str, area: Area, features: Features, key: str
    ) -> tuple[CaseFailed | None, list[int]]:
        base = int.from_bytes(hashlib.sha256(key.encode()).digest()[:6] if self.derandomize else os.urandom(6))
        for k in range(self.examples):
            found = draw_and_check(session, test_id, area, features, k, (base << 24) + k)
            if found is not None:
                return found
        return None, []

    def _hypothesis(self, session: Session, test_id: str, area: Area, key: str, strategy: Any, db: Any) -> None:
        """Hypothesis replays what `db` holds and shrinks what fails; raises the smallest failure."""
        from hypothesis import HealthCheck, Phase, given, seed, settings

        @settings(
            database=db,
            phases=[Phase.reuse, Phase.shrink],
            derandomize=False,  # (which turns the database off; `seed` below makes shrinking repeatable,
            # and the settings, applied after it, keep the database)
            max_examples=max(2, self.examples),
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        )
        @seed(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8]) if self.derandomize else None)
        @given(case=strategy)
        def replay(case: Any) -> None:
            session.check(test_id, area, case)

        # the key of this test's entries in a persistent database (the source above is every test's)
        replay.hypothesis.inner_test._hypothesis_internal_add_digest = key.encode()  # type: ignore[attr-defined]
        try:
            replay()
        except unittest.SkipTest:
            pass  # the database held nothing for this test


def draw_and_check(
    session: Session, test_id: str, area: Area, features: Features, k: int, seed: int
) -> tuple[CaseFailed, list[int]] | None:
    """Draw case `k` of a test's search (`seed`) and judge it; a failure, with the choices that
    drew it.

    One case at a time for the cyclic collector: a case's programs are cycles (values and ops
    point at each other) that only it frees. Left to itself it ran mid-case, found the case's
    programs alive and moved them to older generations, where they turned to garbage that only
    the rarer, slower collections freed: 1.3 s of a 13 s certify run on the reference. Paused for
    the case and run at its end, when the case is garbage (drawn and judged in a frame of its own,
    gone by then), it finds all of it young: 0.5 s (`gc.callbacks`; README, Overhead)."""
    with collector.paused(collect_young=True):
        return _draw_and_judge(session, test_id, area, features, k, seed)


def _draw_and_judge(
    session: Session, test_id: str, area: Area, features: Features, k: int, seed: int
) -> tuple[CaseFailed, list[int]] | None:
    t = time.perf_counter()
    chooser = Seeded(seed) if k else Simplest()  # first the smallest case, as hypothesis
    case = draw(chooser, features, area.order, area.name)
    try:
        session.check(test_id, area, case, time.perf_counter() - t, f"seed:{seed:x}" if k else "simplest")
    except CaseFailed as e:
        return e, chooser.choices
    return None


def draw(chooser: Chooser, features: Features, order: int, area: str = "") -> Case:
    """One case of `features` (of `order`) from `chooser`, for `area`: what the area's hypothesis
    strategy (`areas._draw`) draws from the same choices."""
    case = Generator(chooser, features).case()
    case = second_order(case, chooser) if order == 2 else case
    case.area = area  # (a case made here: set, not copied)
    return case


def redraw(test_id: str, drawn: str, capabilities: frozenset[str] | None = None) -> Case:
    """The case the seeded search drew for `test_id` ("test_<area>.py::<test>") as `drawn` (a
    record's "draw": "seed:HEX" or "simplest"), drawn again by this version of the generator, for a
    backend of `capabilities`."""
    test = tests().get(test_id)
    if test is None:
        raise ValueError(f"{test_id!r} is not a certification test")
    spec, features = test._gradcert_area, test._gradcert_features  # type: ignore[attr-defined]
    if capabilities is not None:
        features = features.narrow(capabilities)
    if drawn == "simplest":
        chooser: Seeded = Simplest()
    elif drawn.startswith("seed:"):
        chooser = Seeded(int(drawn[5:], 16))
    else:
        raise ValueError(f"{drawn!r} is not a seeded draw (seed:HEX or simplest)")
    return draw(chooser, features, spec.order, spec.name)


def recorded_text(record: dict[str, Any], capabilities: frozenset[str] | None = None) -> str:
    """The text of a verdict record's case: as recorded (a failure), or drawn again from its draw
    (a pass the search drew) for a backend of `capabilities`."""
    if "case" in record:
        return str(record["case"])
    return redraw(record["test_id"], record["draw"], capabilities).to_text()


def _to_bytes(choices: list[int]) -> bytes:
    from hypothesis.database import choices_to_bytes

    return choices_to_bytes(choices)


def _handed(found: bytes | None, store: Any) -> Any:
    """The example database that hands `found` over (see `_handed_type`)."""
    return _handed_type()(found, store)


@functools.cache
def _handed_type() -> type:
    from hypothesis.database import ExampleDatabase

    class Handed(ExampleDatabase):
        """A persistent database (or none), and one failing case handed over as a secondary example:
        hypothesis replays secondary examples when it has too few primary ones and shrinks what fails
        (a primary example that fails as stored counts as shrunk already)."""

        def __init__(self, found: bytes | None, store: ExampleDatabase | None) -> None:
            super().__init__()
            self.found, self.store = found, store

        def fetch(self, key: bytes) -> Iterable[bytes]:
            if self.found is not None and key.endswith(b".secondary"):
                yield self.found
            if self.store is not None:
                yield from self.store.fetch(key)

        def save(self, key: bytes, value: bytes) -> None:
            if self.store is not None:
                self.store.save(key, value)

        def delete(self, key: bytes, value: bytes) -> None:
            if self.store is not None:
                self.store.delete(key, value)

    return Handed
