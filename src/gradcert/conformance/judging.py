"""How an area test judges its cases: drawn fast, every one judged, each new defect shown once by
its minimal case.

A test judges its whole budget and never stops at a failure: failing cases are grouped by
signature (`defects.py`: the culprit localization finds, `localize.py`, and the kind) as they are
judged, a known defect's cases are `known` and the drawing goes on. A localized defect's minimal
case is the derived case that showed its culprit; a defect no derived case showed has its first
case shrunk once by hypothesis, within a time budget, to the smallest case that still fails with
the same signature and clearly (`oracles.clear`). The test then fails with one block per new
defect.

Cases are drawn by the seeded generator (`Seeded`: a few hundred microseconds a case, where
hypothesis's engine takes milliseconds for the same draw: most of a check's time on a fast backend,
bench/overhead.py). The seeded chooser keeps its choices as hypothesis records them, so the first
failing case of an unlocalized defect is handed to hypothesis through its example database, the way it takes a
failure from an external fuzzer (`fuzz_one_input` saves it as a "secondary" example): hypothesis
replays it and shrinks it, every step judged by the session. Hypothesis's persistent database
(nightly) is replayed before anything new is drawn, so an earlier night's failures come first.

The hand-over uses hypothesis's database format (`hypothesis.database.choices_to_bytes`) and its
"secondary" examples, as `fuzz_one_input` does: tested with hypothesis 6.155 and 6.170
(`tests/conformance/test_judging.py` replays a seeded case of every area test choice for choice).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
import unittest
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gradcert.conformance.areas import Area, tests
from gradcert.conformance.defects import unroled
from gradcert.conformance.oracles import clear
from gradcert.conformance.session import CaseFailed, Session
from gradcert.conformance.verdicts import DEFECTIVE, Status, Verdict
from gradcert.generators.build import Generator
from gradcert.generators.case import Case
from gradcert.generators.choices import Chooser, Seeded, Simplest
from gradcert.generators.coverage import Pair, Tally, pairs
from gradcert.generators.features import Features
from gradcert.generators.second_order import second_order
from gradcert.reference import collector

# not shrunk: answers that differ from run to run; a crash or hang (every step would cost a
# worker's restart, or the timeout)
_UNSHRUNK = (Status.NONDETERMINISTIC, Status.CRASH, Status.TIMEOUT)


@dataclass
class Found:
    """The failing cases of one signature that a test met: how many, and its first."""

    verdict: Verdict
    case: Case
    choices: list[int] | None  # the choices that drew the first case (None: replayed from a database)
    count: int = 1


@dataclass(frozen=True)
class Search:
    examples: int  # cases drawn per test
    derandomize: bool  # the same cases every run (seeds from the test's key)
    shrink: bool = True
    db: str | None = None  # hypothesis's persistent example database (a folder)
    shrink_seconds: float = 30.0  # the time a defect's shrink may take (fuzzing: and all of this process's)
    # the seconds this process's shrinks took so far (against the clock, `shrink_seconds` is their total too)
    spent: list[float] = field(default_factory=lambda: [0.0], compare=False)

    def run(
        self, session: Session, test_id: str, area: Area, features: Features, key: str, strategy: Callable[[], Any]
    ) -> None:
        """Judge every case of the budget (`examples`, or the session's time budget); group the
        failures by signature; shrink each new defect's first case once; raise the report of the
        new defects (a test whose failures are all known defects passes).

        `strategy()` makes the hypothesis strategy that draws the same cases as `Seeded` from the
        same choices (made only to shrink or replay: hypothesis takes 0.2 s to import); `key` tells
        this test's seeds and database entries from every other test's."""
        found: dict[str, Found] = {}
        store = None
        if self.db:
            store = database(self.db)
            self._replay(session, test_id, area, key, strategy(), store, found)
        base = _base(key, self.derandomize)
        tally = Tally()
        # fuzzing steers towards the pairs this test's earlier nights (the database) and this run met least
        seen = _seen(store, key) if not self.derandomize else None
        for k in range(self.examples):
            if session.over_budget(test_id):
                break
            seeds = range(base + STEER * k, base + STEER * (k + 1)) if seen is not None and k else [base + k]
            v, case, choices, hit = draw_and_check(session, test_id, area, features, k, seeds, seen)
            tally.pairs.update(hit)
            tally.cases += 1
            if seen is not None:
                seen.pairs.update(hit)
            _group(found, area, v, case, choices)
        session.coverage(test_id, area, tally)
        if seen is not None and store is not None:
            _save_seen(store, key, seen)
        # a localized defect's minimal case is the derived case that showed its culprit; a defect
        # no derived case showed is shrunk, which settles the role of its wrong inputs: a role it
        # shrinks away was the program's, and the cases of both roles are one defect
        settled: dict[str, tuple[Case, Verdict, bool, int, list[str]]] = {}
        todo = [(sig, f) for sig, f in found.items() if f.verdict.status != Status.KNOWN]
        for i, (sig, f) in enumerate(todo, 1):
            if (
                sig not in session.causes
                and self.shrink
                and f.choices is not None
                and f.verdict.status not in _UNSHRUNK
            ):
                session.shrinking(test_id, i, len(todo))
            case, v, shrunk = self.minimal(session, area, key, strategy, f, sig, store)
            final = v.signature if shrunk else sig
            if final in settled:
                c, w, s, n, of = settled[final]
                smaller = case.size() < c.size()
                settled[final] = (case if smaller else c, v if smaller else w, s or shrunk, n + f.count, [*of, sig])
            else:
                settled[final] = (case, v, shrunk, f.count, [sig])
        reports = []
        for final, (case, v, shrunk, count, of) in settled.items():
            report = session.defect(test_id, area, final, case, v, count, shrunk, of)
            if v.status != Status.KNOWN:  # (shrunk into a known defect: its cases are that defect's)
                reports.append(report)
        if reports:
            raise CaseFailed(f"{len(reports)} new defect(s)\n\n" + "\n\n".join(reports))

    def minimal(
        self, session: Session, area: Area, key: str, strategy: Callable[[], Any], f: Found, sig: str, store: Any
    ) -> tuple[Case, Verdict, bool]:
        """The minimal case of defect `sig` whose first case `f` holds, its verdict, and whether it
        is smaller than the case met: a localized defect's is the derived case that showed its
        culprit; a defect no derived case showed is shrunk (where the search drew it)."""
        if sig in session.causes:
            if store is not None and f.choices is not None:  # (replayed first the next night, as a shrunk one)
                store.save(b"gradcert/" + key.encode(), _to_bytes(f.choices))
            cause, v = session.causes[sig]
            v = replace(v, status=f.verdict.status, kind=f.verdict.kind, culprit=f.verdict.culprit)
            return replace(cause.case, area=area.name), v, True
        if self.shrink and f.choices is not None and f.verdict.status not in _UNSHRUNK:
            return self._shrink(session, area, key, strategy(), f, sig, store)
        return f.case, f.verdict, False

    def _settings(self, key: str, db: Any, phases: list[Any]) -> Callable[[Any], Any]:
        from hypothesis import HealthCheck, seed, settings

        _hypothesis_home()

        s = settings(
            database=db,
            phases=phases,
            derandomize=False,  # (which turns the database off; `seed` below makes shrinking repeatable,
            # and the settings, applied after it, keep the database)
            max_examples=max(2, self.examples),
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        sd = seed(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8]) if self.derandomize else None)
        return lambda f: s(sd(f))

    def _replay(
        self, session: Session, test_id: str, area: Area, key: str, strategy: Any, store: Any, found: dict[str, Found]
    ) -> None:
        """Every case the persistent database holds for this test, judged and grouped first."""
        from hypothesis import Phase, given

        # (the replay itself never fails, so hypothesis would delete every entry it replays: they
        # stay, until a shrink replaces one with a smaller case)
        @self._settings(key, _handed(None, store, keep=True), [Phase.reuse])
        @given(case=strategy)
        def replay(case: Any) -> None:
            case.area = area.name  # (a case made here: set, not copied)
            _group(found, area, session.check(test_id, area, case), case, None)

        _keyed(replay, key)
        try:
            replay()
        except unittest.SkipTest:
            pass  # the database held nothing for this test

    def _shrink(
        self, session: Session, area: Area, key: str, strategy: Any, f: Found, sig: str, store: Any
    ) -> tuple[Case, Verdict, bool]:
        """The smallest case hypothesis finds from `f`'s first case that still fails with `sig` (the
        wrong inputs in any role; a known defect's signature too: then the cases are that defect's),
        clearly (`oracles.clear`), within `shrink_seconds`; its verdict; whether it shrank. A wrong
        value that is never clear (a gradient too small for its error to stand out) is shrunk as
        it fails, rather than shown unshrunk."""
        assert f.choices is not None
        t0 = time.monotonic()
        # within `shrink_seconds` for this defect and, in a run against the clock (fuzzing), what
        # is left of them for this process and of the run's time. (A certification shrinks each
        # defect for its own `shrink_seconds`: a case whose shrink was cut short keeps the
        # signature it was met with, and would be told NEW where its shrink settles it into one
        # of the backend's known defects.)
        left = self.shrink_seconds - self.spent[0] if session.deadline is not None else self.shrink_seconds
        deadline = t0 + min(self.shrink_seconds, left, session.left())
        try:
            for clearly in (True, False):
                if time.monotonic() >= deadline:
                    break
                best = self._smallest(session, area, key, strategy, f.choices, sig, store, deadline, clearly)
                if best is not None:
                    return (*best, True)
            return f.case, f.verdict, False
        finally:
            self.spent[0] += time.monotonic() - t0

    def _smallest(
        self,
        session: Session,
        area: Area,
        key: str,
        strategy: Any,
        choices: list[int],
        sig: str,
        store: Any,
        deadline: float,
        clearly: bool,
    ) -> tuple[Case, Verdict] | None:
        from hypothesis import Phase, given

        best: list[tuple[Case, Verdict]] = []

        @self._settings(key, _handed(_to_bytes(choices), store), [Phase.reuse, Phase.shrink])
        @given(case=strategy)
        def replay(case: Any) -> None:
            if time.monotonic() > deadline:
                raise _TimeUp  # (out through hypothesis: the smallest so far stands)
            v = session.verdict(area, case)
            # (in any role of the wrong inputs: the smallest case tells where the defect lives)
            if v.kind and unroled(v.signature) == unroled(sig) and (clear(v, case.dtype) or not clearly):
                if not best or case.size() <= best[-1][0].size():
                    best.append((replace(case, area=area.name), v))
                raise CaseFailed(sig)

        _keyed(replay, key)
        try:
            replay()
        except (Exception, _TimeUp):  # the smallest failure, or the time is up
            pass
        return best[-1] if best else None


class _TimeUp(BaseException):
    """A shrink's time is up: raised by a step, out through hypothesis (which shrinks an
    `Exception` as a failure of its own, and would go on stepping past a deadline)."""


@functools.cache
def _hypothesis_home() -> None:
    """Hypothesis's own files (its cache of the constants it met) go under the user's cache
    folder, never into the folder a run is started from."""
    from hypothesis.configuration import set_hypothesis_home_dir

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    set_hypothesis_home_dir(cache / "gradcert" / "hypothesis")


class DatabaseError(ValueError):
    """An example database that cannot be opened or reached (one line naming it)."""


def database(spec: str) -> Any:
    """Hypothesis's example database named by `spec`: a folder, or `redis://HOST:PORT/N` (its Redis
    database, shared by every worker and every night). A Redis server that does not answer is a
    DatabaseError at once, not a failure in the middle of a night."""
    if not spec.startswith(("redis://", "rediss://")):
        from hypothesis.database import DirectoryBasedExampleDatabase

        return DirectoryBasedExampleDatabase(spec)
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise DatabaseError(f"{spec}: a Redis example database needs redis: pip install 'gradcert[cluster]'") from None
    try:
        client = redis.Redis.from_url(spec, socket_connect_timeout=5, socket_timeout=30)
        client.ping()
    except (redis.RedisError, ValueError) as e:
        raise DatabaseError(f"cannot reach the example database {spec}: {e}") from None
    return RedisExampleDatabase(client)


def _group(found: dict[str, Found], area: Area, v: Verdict, case: Case | None, choices: list[int] | None) -> None:
    if case is None or not v.kind or v.status not in DEFECTIVE:
        return
    sig = v.signature
    if sig in found:
        found[sig].count += 1
    else:
        found[sig] = Found(v, case, choices)


def draw_and_check(
    session: Session,
    test_id: str,
    area: Area,
    features: Features,
    k: int,
    seeds: int | Sequence[int],
    seen: Tally | None = None,
) -> tuple[Verdict, Case | None, list[int], set[Pair]]:
    """Draw case `k` of a test's search and judge it: the verdict, the case where it failed (None
    where it passed: its programs are garbage at its end, below), the choices that drew it and the
    coverage pairs it hit. Of several `seeds`, the case whose pairs `seen` has met least is judged.

    One case at a time for the cyclic collector: a case's programs are cycles (values and ops
    point at each other) that only it frees. Left to itself it ran mid-case, found the case's
    programs alive and moved them to older generations, where they turned to garbage that only
    the rarer, slower collections freed. Paused for the case and run at its end, when the case
    is garbage, it finds all of it young (`gc.callbacks`; docs/performance.md)."""
    with collector.paused(collect_young=True):
        return _draw_and_judge(session, test_id, area, features, k, [seeds] if isinstance(seeds, int) else seeds, seen)


def _draw_and_judge(
    session: Session, test_id: str, area: Area, features: Features, k: int, seeds: Sequence[int], seen: Tally | None
) -> tuple[Verdict, Case | None, list[int], set[Pair]]:
    t = time.perf_counter()
    best: tuple[float, Seeded, Case, set[Pair], int] | None = None
    for seed in seeds:
        chooser = Seeded(seed) if k else Simplest()  # first the smallest case, as hypothesis
        case = draw(chooser, features, area.order, area.name)
        hit = pairs(case)
        score = seen.novelty(hit) if seen is not None and len(seeds) > 1 else 0.0
        if best is None or score > best[0]:
            best = (score, chooser, case, hit, seed)
    assert best is not None
    _, chooser, case, hit, seed = best
    v = session.check(test_id, area, case, time.perf_counter() - t, f"seed:{seed:x}" if k else "simplest")
    return v, case if v.kind else None, chooser.choices, hit


def draw(chooser: Chooser, features: Features, order: int, area: str = "") -> Case:
    """One case of `features` (of `order`) from `chooser`, for `area`: what the area's hypothesis
    strategy (`areas.strategy`) draws from the same choices."""
    case = Generator(chooser, features).case()
    case = second_order(case, chooser) if order == 2 else case
    case.area = area  # (a case made here: set, not copied)
    return case


def _base(key: str, derandomize: bool) -> int:
    """The first seed of a test's search: from its key (the same cases every run) or at random."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:6] if derandomize else os.urandom(6)) << 24


def drawn(examples: int, capabilities: frozenset[str] | None = None) -> Iterator[Case]:
    """Every case a derandomized run of `examples` cases per certification test draws (the
    `certify` profile: 250), for a backend of `capabilities` (None: every one), test by test."""
    for test in tests().values():
        spec, features, key = test._gradcert_area, test._gradcert_features, test._gradcert_key  # type: ignore[attr-defined]
        if capabilities is not None:
            if not spec.needs <= capabilities:
                continue
            features = features.narrow(capabilities)
        base = _base(key, True)
        for k in range(examples):
            yield draw(Seeded(base + k) if k else Simplest(), features, spec.order, spec.name)


# fuzzing draws this many cases for each one it judges, and judges the one that adds most coverage
STEER = 4


def _seen(store: Any, key: str) -> Tally:
    """The pairs this test's cases met on earlier nights, as the example database keeps them."""
    seen = Tally()
    if store is not None:
        for blob in store.fetch(_coverage_key(key)):
            try:
                seen.merge(Tally.from_json(json.loads(blob)))
            except (ValueError, TypeError, AttributeError):
                pass  # (not a tally: another tool's entry)
    return seen


def _save_seen(store: Any, key: str, seen: Tally) -> None:
    k = _coverage_key(key)
    for old in list(store.fetch(k)):
        store.delete(k, old)
    store.save(k, json.dumps(seen.to_json()).encode())


def _coverage_key(key: str) -> bytes:
    return b"gradcert-coverage/" + key.encode()


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


def _keyed(test: Any, key: str) -> None:
    """Name the database entries of hypothesis test `test` (a replay or a shrink of one
    certification test) by the certification test's `key`: hypothesis would name them by a digest
    of the function's source, which differs between the replaying and the shrinking function, so
    that what one night's shrink saved the next night's replay never fetched."""
    test._hypothesis_internal_database_key = b"gradcert/" + key.encode()


def _to_bytes(choices: list[int]) -> bytes:
    from hypothesis.database import choices_to_bytes

    return choices_to_bytes(choices)


def _handed(found: bytes | None, store: Any, keep: bool = False) -> Any:
    """The example database that hands `found` over (see `_handed_type`); `keep`: deletes nothing."""
    return _handed_type()(found, store, keep)


@functools.cache
def _handed_type() -> type:
    from hypothesis.database import ExampleDatabase

    class Handed(ExampleDatabase):
        """A persistent database (or none), and one failing case handed over as a secondary example:
        hypothesis replays secondary examples when it has too few primary ones and shrinks what fails
        (a primary example that fails as stored counts as shrunk already)."""

        def __init__(self, found: bytes | None, store: ExampleDatabase | None, keep: bool) -> None:
            super().__init__()
            self.found, self.store, self.keep = found, store, keep

        def fetch(self, key: bytes) -> Iterable[bytes]:
            if self.found is not None and key.endswith(b".secondary"):
                yield self.found
            if self.store is not None:
                yield from self.store.fetch(key)

        def save(self, key: bytes, value: bytes) -> None:
            if self.store is not None:
                self.store.save(key, value)

        def delete(self, key: bytes, value: bytes) -> None:
            if self.store is not None and not self.keep:
                self.store.delete(key, value)

    return Handed
