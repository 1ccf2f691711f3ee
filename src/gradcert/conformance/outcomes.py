"""Counting verdicts and defects: what every report, the terminal summary and a baseline
comparison show (the runs print them, `gradcert.reports` renders them).

A results file holds three kinds of record: a case's verdict (it has a `case_id`), a defect a test
found and shrank (`defect`: its signature), and the start and end of a run (`run`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gradcert.conformance.verdicts import DEFECTIVE, Status

if TYPE_CHECKING:
    from gradcert.generators.coverage import Tally


@dataclass
class Loaded:
    cases: list[dict[str, Any]]  # the latest verdict of each (backend, test, case)
    defects: list[dict[str, Any]]  # defect records, in order
    runs: list[dict[str, Any]]  # run records, in order
    unmet: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (backend, signature) -> record
    # backend -> the coverage pairs its cases hit (`generators/coverage.py`), every test's added up
    coverage: dict[str, Tally] = field(default_factory=dict)

    @property
    def ending(self) -> dict[str, Any] | None:
        """The end record of the last run, or a synthetic incomplete ending where the last run
        started and never ended (killed outright); None where no run is on record (a results
        file written by pytest alone)."""
        if not self.runs:
            return None
        last = self.runs[-1]
        if last["run"] == "end":
            return last
        return {"run": "end", "complete": False, "planned": last.get("planned"), "signal": "killed"}

    @property
    def incomplete(self) -> bool:
        e = self.ending
        return e is not None and not e.get("complete")


def load(records: Iterable[dict[str, Any]]) -> Loaded:
    cases: dict[tuple[str, str, str], dict[str, Any]] = {}
    defects, runs, unmet = [], [], {}
    coverage: dict[str, Tally] = {}
    for r in records:
        if "run" in r:
            runs.append(r)
        elif "coverage" in r:
            from gradcert.generators.coverage import Tally  # (the IR with it: only where a run recorded coverage)

            coverage.setdefault(r.get("backend", ""), Tally()).merge(Tally.from_json(r))
        elif "unmet" in r:
            unmet[(r["backend"], r["unmet"])] = r
        elif "defect" in r:
            defects.append(r)
        elif "case_id" in r:
            cases[(r.get("backend", ""), r.get("test_id", ""), case_key(r))] = r
    return Loaded(settle(list(cases.values()), defects), defects, runs, unmet, coverage)


def settle(cases: list[dict[str, Any]], defects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The case records with the signature their test's shrunk defect settled, or the run's where
    the test shrank none of it (`of`: a case's signature names the role of its wrong inputs in its
    own program; the shrink tells whether the defect needs that role), and `known` where it
    settled on a known defect."""
    settled = {(d.get("backend", ""), d.get("test_id", ""), s): d for d in defects for s in d.get("of", ())}
    # (a cluster shrinks a signature once for every test: the run's shrink settles it for each)
    anywhere: dict[tuple[str, str], dict[str, Any]] = {}
    for d in defects:
        for s in d.get("of", ()):
            anywhere.setdefault((d.get("backend", ""), s), d)
    out: list[dict[str, Any]] = []
    for r in cases:
        b, sig = r.get("backend", ""), str(r.get("signature"))
        into = settled.get((b, r.get("test_id", ""), sig)) or anywhere.get((b, sig))
        if into is not None and into["defect"] != r["signature"]:
            status = Status.KNOWN if into.get("status") == Status.KNOWN else r["status"]
            r = {**r, "signature": into["defect"], "status": status, "drawn_as": r["signature"]}
        out.append(r)
    return out


def case_key(r: dict[str, Any]) -> str:
    """What names a case across runs: its draw (a seeded case is drawn again by a rerun before its
    text is made; a pass is on record by its draw alone), else its id."""
    return str(r.get("draw") or r["case_id"])


def latest(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (backend, test, case): the last written (a resumed run may repeat none)."""
    return load(records).cases


def matrix(records: list[dict[str, Any]]) -> dict[str, dict[str, Counter[str]]]:
    """backend -> area -> status counts."""
    m: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for r in records:
        m[r["backend"]][r["area"]][r["status"]] += 1
    return m


@dataclass
class Defect:
    """One cause (`defects.py`): the signature its cases share, where it showed, how often."""

    signature: str
    backend: str
    culprit: str
    kind: str
    status: str  # known, or the failing status of its cases (fail, error, refused, nondeterministic, ...)
    cases: int = 0
    tests: set[str] = field(default_factory=set)
    areas: set[str] = field(default_factory=set)  # where its cases were met
    example: dict[str, Any] | None = None  # the smallest record showing it: a shrunk defect, else a case
    known: Any = None  # the KnownDefect, for a known one

    @property
    def new(self) -> bool:
        return self.known is None


def defects(loaded: Loaded, known: dict[str, dict[str, Any]] | None = None) -> list[Defect]:
    """Every distinct defect in the records, by signature: its case count, the tests that met it
    and its smallest case; new ones first (then by case count). `known`: backend -> signature ->
    KnownDefect, to name the known ones."""
    out: dict[tuple[str, str], Defect] = {}

    def get(r: dict[str, Any], sig: str) -> Defect:
        key = (r["backend"], sig)
        if key not in out:
            culprit, _, kind = sig.partition(" | ")
            k = (known or {}).get(r["backend"], {}).get(sig)
            out[key] = Defect(sig, r["backend"], culprit, kind, r["status"], known=k)
        return out[key]

    for r in loaded.cases:
        sig = r.get("signature")
        if sig and r["status"] in DEFECTIVE:
            d = get(r, sig)
            d.cases += 1
            d.tests.add(r["test_id"])
            d.areas.add(r.get("area", ""))
            if r["status"] == Status.NONDETERMINISTIC:
                d.status = Status.NONDETERMINISTIC
            if d.example is None or r.get("size", 0) < d.example.get("size", 0):
                d.example = r
    for r in loaded.defects:
        d = get(r, r["defect"])
        if d.example is None or "defect" not in d.example or r.get("size", 0) < d.example.get("size", 0):
            d.example = r
    return sorted(out.values(), key=lambda d: (not d.new, d.status != Status.NONDETERMINISTIC, -d.cases, d.signature))


def not_reproduced(loaded: Loaded, known: dict[str, dict[str, Any]]) -> list[Any]:
    """The known defects of areas this run judged that no case showed: fixed, or not drawn (the
    run's `unmet` records say which: each one's minimal case judged again)."""
    met = {(r["backend"], r.get("signature")) for r in loaded.cases if r["status"] == Status.KNOWN}
    ran = {(r["backend"], r["area"]) for r in loaded.cases if r["status"] != Status.UNSUPPORTED}
    return [
        k
        for backend, ks in known.items()
        for sig, k in sorted(ks.items())
        if (backend, k.area) in ran and (backend, sig) not in met
    ]


def fixed(loaded: Loaded, k: Any, backend: str) -> bool | None:
    """Whether a known defect no case showed is fixed: its minimal case passes now (None: not
    judged again)."""
    r = loaded.unmet.get((backend, k.signature))
    return None if r is None else not r["still_fails"]


@dataclass
class Comparison:
    regressions: list[dict[str, Any]]  # cases that passed in the baseline and fail now
    new: list[str]  # signatures met now, not in the baseline
    fixed: list[str]  # in the baseline, not met now
    still: list[str]  # in both


def compare(baseline: Loaded, now: Loaded) -> Comparison:
    """This run against an earlier one of the same draws (`certify --baseline`)."""
    before = {(r["test_id"], case_key(r)): r["status"] for r in baseline.cases}
    bad = DEFECTIVE
    regressions = [
        r
        for r in now.cases
        if r["status"] in bad and before.get((r["test_id"], case_key(r))) in (Status.PASS, Status.INVALID)
    ]
    was = {r["signature"] for r in baseline.cases if r.get("signature") and r["status"] in bad}
    was |= {r["defect"] for r in baseline.defects}
    is_ = {r["signature"] for r in now.cases if r.get("signature") and r["status"] in bad}
    is_ |= {r["defect"] for r in now.defects}
    return Comparison(regressions, sorted(is_ - was), sorted(was - is_), sorted(is_ & was))
