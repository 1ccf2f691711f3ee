"""A certification session: one backend, one results file; judges cases and records verdicts."""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcert.backends.protocol import BackendResult, Tolerance
from gradcert.backends.reference import ReferenceBackend
from gradcert.backends.registry import resolve
from gradcert.conformance.areas import Area
from gradcert.conformance.defects import canonical, kind, known_defects, unlocalized
from gradcert.conformance.isolation.runner import InProcess, Isolated, Outcome
from gradcert.conformance.localize import PASSED, Cache, Cause, localize
from gradcert.conformance.oracles import float32_tolerance, judge, normals
from gradcert.conformance.oracles import reference as compare_reference
from gradcert.conformance.results import ResultsFile, progress_path
from gradcert.conformance.verdicts import FAILING, Status, Verdict
from gradcert.generators.case import Case
from gradcert.reference.interpreter import namespace

if TYPE_CHECKING:
    from gradcert.generators.coverage import Tally

Held = tuple[str, str, str, str, str]  # a verdict as a session holds it: status, oracle, message, kind, culprit
AGAIN = 2  # a new failure is judged this many times more: answers that differ are nondeterministic


class CaseFailed(AssertionError):
    pass


class Session:
    def __init__(
        self,
        spec: str,
        results: str | Path | None,
        findings: str | Path,
        profile: str = "quick",
        isolate: bool | None = None,
        timeout: float = 60.0,
        seed: int = 0,
        exhaustive: bool = False,
        budget: float | None = None,
        device: str = "cpu",
        deadline: float | None = None,
        draw_until: float | None = None,
    ) -> None:
        """`device`: where the backend runs its cases, and where the reference's interpreter runs
        the expected gradients and finite differences (NumPy on "cpu", CuPy on "gpu").
        `deadline`: the wall-clock time (`time.time()`) by which every test's work ends — drawing,
        localization and shrinking (a fuzzing night's `--minutes`); `draw_until`: when drawing new
        cases ends, leaving the rest to shrinking."""
        self.spec, self.profile, self.seed, self.exhaustive = spec, profile, seed, exhaustive
        self.device = device
        self.xp = namespace(device)  # (CuPy missing: one line, before the backend is asked)
        backend = resolve(spec, device)  # fails fast, in this process, for an unknown backend or device
        self.name = backend.name
        self.capabilities = backend.capabilities
        isolate = (spec != "reference") if isolate is None else isolate
        self.runner: InProcess | Isolated = Isolated(spec, timeout, device) if isolate else InProcess(backend)
        self.reference = ReferenceBackend(listing=False, xp=self.xp)  # the expected gradients only
        self.results = ResultsFile(results) if results is not None else None
        self.findings = Path(findings)
        # (test id, case id) -> (status, oracle, message): the verdicts this session gave, and those
        # on record from an earlier run (resumed); the verdict alone, not its record, which is
        # several times larger: a worker's hour of fuzzing holds millions (bench/memory.py)
        self._verdicts: dict[Held, Held] = {}  # (passes share a handful)
        self.done: dict[tuple[str, str], Held] = {}
        self.earlier: dict[tuple[str, str], Held] = {}
        if self.results is not None:
            for key, verdict in self.results.finished():
                self.earlier[key] = self._verdict(*verdict)  # (the last of a case's, where it has several)
        self.last: dict[str, Any] | None = None  # the record of the last verdict written
        # fuzzing: seconds each test may draw new cases for (its new defects are shrunk after)
        self.budget = budget
        self.deadline, self.draw_until = deadline, draw_until
        self.started: dict[str, float] = {}
        self.saved: set[Path] = set()  # case files written by this session
        self.known = known_defects(self.name)  # signature -> the backend's known defect
        # localization (`localize.py`): derived cases' answers by structure; each failing case's
        # culprit by (case id, kind); the smallest derived case of each signature met, with its verdict
        self.probes = Cache()
        self._culprits: dict[tuple[str, str], str | None] = {}
        self.causes: dict[str, tuple[Cause, Verdict]] = {}
        self.localized: list[tuple[int, bool]] = []  # per failing case: backend calls, whether localized
        self.calls: dict[tuple[str, str], int] = {}  # (case id, kind) -> the backend calls its localization spent
        self.probed = 0  # the backend calls the last failure's localization spent

    def close(self) -> None:
        self.runner.close()
        if self.results is not None:
            self.results.close()

    # --- one case ------------------------------------------------------------------------------
    def judge(self, area: Area, case: Case) -> Verdict:
        """The classified verdict on one case (a failure judged again, as in a run), recorded
        nowhere (replay)."""
        case = replace(case, area=area.name)
        return self._classify(area, case, self._judge(area, case)[0])

    def check(
        self, test_id: str, area: Area, case: Case, drawn_s: float | None = None, draw: str | None = None
    ) -> Verdict:
        """Judge `case` for `test_id` (once: a case met again gets its first verdict) and record the
        verdict. A failure that is one of the backend's known defects is `known`; any other failure
        is judged again (`AGAIN` more times) and is `nondeterministic` where the answers differ.
        `drawn_s`: the seconds it took to draw, for the record's timings. `draw`: how the seeded
        search drew it ("seed:HEX" or "simplest", `judging.redraw` draws it again), which then names
        it, and stands in for its text in the record of a pass (printing a case cost a tenth of a
        check, and the text of every pass made most of a results file)."""
        if case.area != area.name:
            case = replace(case, area=area.name)
        key = (test_id, draw or case.id)
        old = self.done.get(key) or self.earlier.get(key)
        if old is not None and (key in self.done or old[0] not in FAILING):
            # judged already (a failure from an earlier run is judged again: it may be fixed)
            verdict = Verdict(Status(old[0]), *old[1:3])
            verdict.kind, verdict.culprit = old[3], old[4]
        else:
            t0 = time.perf_counter()
            verdict, timings = self._judge(area, case)
            verdict = self._classify(area, case, verdict)
            timings["total"] = time.perf_counter() - t0
            if drawn_s is not None:
                timings["generation"] = drawn_s
            self._record(test_id, area, case, verdict, timings, draw)
        return verdict

    def over_budget(self, test_id: str) -> bool:
        """Whether `test_id` has drawn new cases for its time budget (fuzzing) already, or the run's
        drawing is over (`draw_until`, `deadline`)."""
        start = self.started.setdefault(test_id, time.monotonic())
        if self.budget is not None and time.monotonic() - start > self.budget:
            return True
        end = min((t for t in (self.draw_until, self.deadline) if t is not None), default=None)
        return end is not None and time.time() > end

    def past_deadline(self) -> bool:
        """Whether the run's wall-clock deadline has passed (its work ends: no more localizing or
        shrinking)."""
        return self.deadline is not None and time.time() > self.deadline

    def left(self) -> float:
        """Seconds to the run's deadline (infinite without one)."""
        return float("inf") if self.deadline is None else self.deadline - time.time()

    def shrinking(self, test_id: str, index: int, of: int) -> None:
        """Record that `test_id` shrinks its defect `index` of `of` (the live line shows it)."""
        if self.results is not None and isinstance(self.results, ResultsFile):
            notes = ResultsFile(progress_path(self.results.path))
            notes.append({"shrinking": test_id, "index": index, "of": of, "time": time.time()})
            notes.close()

    def verdict(self, area: Area, case: Case) -> Verdict:
        """The classified verdict on `case`, recorded nowhere, not localized (a shrink step of a
        defect no derived case showed: it keeps where it was met)."""
        return self._classify(area, case, self._judge(area, replace(case, area=area.name))[0], again=0, cut=False)

    def _classify(self, area: Area, case: Case, v: Verdict, again: int | None = None, cut: bool = True) -> Verdict:
        """`v` with its kind of discrepancy and its culprit (`localize.py`); `known` where its
        signature is a known defect's; `nondeterministic` where judging the case again gives
        another kind."""
        if v.status not in FAILING:
            return v
        self._name(area, case, v, cut)
        if v.signature in self.known:
            v.status = Status.KNOWN
            return v
        answers = [kind(v.status, v.oracle, v.message, v.actual, v.inputs)]
        # (a hang is not judged again: each time would cost the whole timeout)
        for _ in range(0 if v.status == Status.TIMEOUT else AGAIN if again is None else again):
            w = self._judge(area, case)[0]
            answers.append(kind(w.status, w.oracle, w.message, w.actual, w.inputs) if w.status in FAILING else w.status)
        if len(set(answers)) > 1:
            v.message = f"answers differ when judged {len(answers)} times: {' / '.join(answers)}; first: {v.message}"
            v.status, v.kind, v.culprit = Status.NONDETERMINISTIC, Status.NONDETERMINISTIC, unlocalized(area.name, "")
        return v

    def _name(self, area: Area, case: Case, v: Verdict, cut: bool = True) -> None:
        """Set failing verdict `v`'s kind and culprit: localized where a derived case shows it, else
        where it was met (its kind then names the role of the wrong inputs)."""
        plain = kind(v.status, v.oracle, v.message, v.actual, v.inputs)
        culprit = self.culprit(area, case, plain) if cut else None
        self.probed = self.calls.get((case.id, plain), 0)
        if v.oracle == "bad_request":  # (the request, not the program, is what is judged)
            v.kind, v.culprit = plain, "a cotangent of the wrong shape"
        elif culprit is not None:
            v.kind, v.culprit = plain, culprit
        else:
            v.kind = kind(v.status, v.oracle, v.message, v.actual, v.inputs, case)
            v.culprit = unlocalized(area.name, v.oracle)

    def culprit(self, area: Area, case: Case, plain: str) -> str | None:
        """Where `case`'s failure of kind `plain` lives (once per case and kind); None where no
        derived case fails so, or for what is not localized: a hang (each derived case could cost
        the timeout), a bad request (the request is the culprit), answers that vary."""
        if area.check == "bad_request" or plain in (Status.TIMEOUT, Status.NONDETERMINISTIC):
            return None
        key = (case.id, plain)
        if key not in self._culprits:
            probe = replace(area, check="gradients")
            calls = [0]

            def judged(d: Case) -> tuple[str, list[str]]:
                if self.past_deadline():  # (the run's time is up: no derived case fails)
                    return PASSED, []
                calls[0] += 1
                return self._probe(probe, d)

            found = localize(case, plain, judged, self.probes)
            self._culprits[key] = None if found is None else found.culprit
            self.calls[key] = calls[0]
            self.localized.append((calls[0], found is not None))
            if found is not None:
                sig = f"{found.culprit} | {plain}"
                if sig not in self.causes or found.case.size() < self.causes[sig][0].case.size():
                    self.causes[sig] = (found, self._judge(probe, found.case, known=False)[0])
        return self._culprits[key]

    def _probe(self, area: Area, derived: Case) -> tuple[str, list[str]]:
        """A derived case's judgement, for localization: the kind of its failure, or PASSED."""
        v = self._judge(area, derived, known=False)[0]
        if v.status not in FAILING:
            return PASSED, []
        return kind(v.status, v.oracle, v.message, v.actual, v.inputs), list(v.inputs)

    def _run(self, case: Case) -> BackendResult | Outcome:
        return self.runner.run(case)

    def _judge(self, area: Area, case: Case, known: bool = True) -> tuple[Verdict, dict[str, float]]:
        """The verdict of the oracles on `case`, unclassified; `known`: a known defect's failure
        does not end the judging (`oracles.judge`)."""
        timings: dict[str, float] = {}
        if area.check == "bad_request":
            return self._bad_request(case), timings
        t = time.perf_counter()
        got = self._run(case)
        timings["backend"] = time.perf_counter() - t
        if isinstance(got, Outcome):
            # the area's capabilities are the backend's (else its tests are skipped): a case it
            # cannot express is refused, a failure
            limit = got.error_type == "AdapterLimit"  # (not the framework's: counted as unsupported)
            status = Status.REFUSED if got.status == Status.UNSUPPORTED and not limit else got.status
            return Verdict(status, "backend", got.message), timings
        timings.update({f"backend.{k}": v for k, v in got.timings.items()})  # as the backend splits its time
        t = time.perf_counter()
        tol = None
        try:
            # (a float32 case's expected answers are its float64 twin's: `Case.widened`; its
            # tolerances, how far the reference's own float32 run lands from them, but where the
            # reference is what is certified)
            wide = case.widened()
            ref = self.reference.run(wide) if self.spec != "reference" or wide is not case else got
            if wide is not case and self.spec != "reference":
                tol = float32_tolerance(self.reference.run(case), ref)
        except Exception as e:  # the reference's own backward failed: an error of gradcert's, never a pass
            return Verdict(Status.ERROR, "reference", f"reference backward: {type(e).__name__}: {e}"), timings
        timings["reference"] = time.perf_counter() - t
        t = time.perf_counter()
        verdict = judge(
            case,
            got,
            ref,
            seed=self.seed,
            exhaustive=self.exhaustive,
            xp=self.xp,
            known=partial(self._known, area, case) if known and self.known else None,
            tol=tol,
        )
        if verdict.status == Status.PASS and area.check == "linearity" and case.cotangents is not None:
            linear = self._linearity(case, got, tol)
            verdict = verdict if linear.status == Status.PASS else linear  # (a pass keeps the error measured)
        timings["oracles"] = time.perf_counter() - t
        return verdict, timings

    def _known(self, area: Area, case: Case, v: Verdict) -> bool:
        """Whether failure `v` on `case` is one of the backend's known defects."""
        w = replace(v)
        self._name(area, case, w)
        return w.signature in self.known

    def _linearity(self, case: Case, got: BackendResult, tol: Tolerance | None = None) -> Verdict:
        """g(u1) + g(u2) == g(u1 + u2): the gradients are linear in the cotangents."""
        assert case.cotangents is not None
        u2 = [
            n.astype(u.dtype)
            for n, u in zip(normals(self.seed + 1, [u.shape for u in case.cotangents]), case.cotangents)
        ]
        second = self._run(replace(case, cotangents=u2))
        both = self._run(replace(case, cotangents=[a + b for a, b in zip(case.cotangents, u2)]))
        if isinstance(second, Outcome) or isinstance(both, Outcome):
            bad = second if isinstance(second, Outcome) else both
            return Verdict(bad.status, "linearity", bad.message)  # type: ignore[union-attr]
        summed = BackendResult([None if a is None or b is None else a + b for a, b in zip(got.grads, second.grads)])
        v = compare_reference(case, both, summed, tol)
        if v is None:
            return Verdict(Status.PASS)
        return replace(v, oracle="linearity", message="gradients are not linear in the cotangents: " + v.message)

    def _bad_request(self, case: Case) -> Verdict:
        """A cotangent of the wrong shape must raise a clear error: ValueError (as Paddle's grad does),
        or an error that names the shape (PyTorch's RuntimeError "Mismatch in shape")."""
        if case.cotangents is None:
            return Verdict(Status.PASS)
        bad = [np.zeros((*u.shape, 2)) for u in case.cotangents]
        got = self._run(replace(case, cotangents=bad))
        if isinstance(got, Outcome):
            # a clear error: Paddle's ValueError, or any error whose message names the shape
            if got.status == Status.ERROR and (got.error_type == "ValueError" or "shape" in got.message.lower()):
                return Verdict(Status.PASS)
            if got.error_type == "AdapterLimit":
                return Verdict(Status.UNSUPPORTED, "backend", got.message)
            return Verdict(
                {Status.ERROR: Status.FAIL, Status.UNSUPPORTED: Status.REFUSED}.get(got.status, got.status),
                "bad_request",
                f"a cotangent of the wrong shape should raise a clear error, got {got.message}",
            )
        return Verdict(Status.FAIL, "bad_request", "a cotangent of the wrong shape was accepted")

    # --- records -------------------------------------------------------------------------------
    def _record(
        self, test_id: str, area: Area, case: Case, v: Verdict, timings: dict[str, float], draw: str | None = None
    ) -> None:
        rec: dict[str, Any] = {
            "test_id": test_id,
            "area": area.name,
            "backend": self.name,
            "backend_version": self.runner.version,
            "profile": self.profile,
            "seed": self.seed,
            "time": time.time(),
            "timings": timings,
            "size": case.size(),
            "dtype": case.dtype,
            **v.to_json(),
        }
        if draw is not None:
            rec["draw"] = draw
        if draw is not None and v.status == Status.PASS:
            rec["case_id"] = draw
        else:
            rec["case_id"], rec["case"] = case.id, case.to_text()
        if v.kind:
            rec["signature"] = sig = v.signature
            rec["probes"] = self.probed  # (backend calls its localization spent: bench/localization.py)
            if v.status == Status.KNOWN:
                rec["known_case"] = self.known[sig].case
        if draw is not None and v.kind:
            rec["replay"] = f"gradcert replay '{test_id}[{draw}]' --backend {self.spec}{self._on()}"
        if self.results is not None:
            self.results.append(rec)
        self.done[(test_id, draw or rec["case_id"])] = self._verdict(v.status, v.oracle, v.message, v.kind, v.culprit)
        self.last = rec

    def coverage(self, test_id: str, area: Area, tally: Tally) -> None:
        """Record the coverage pairs `test_id`'s cases hit (`generators/coverage.py`)."""
        if self.results is not None and tally.cases:
            rec = {"coverage": test_id, "area": area.name, "backend": self.name, "profile": self.profile}
            self.results.append({**rec, **tally.to_json()})

    def defect(
        self, test_id: str, area: Area, sig: str, case: Case, v: Verdict, cases: int, shrunk: bool, of: list[str]
    ) -> str:
        """Record a defect found by `test_id` (its signature, the number of its cases the test met,
        the minimal case `case` with verdict `v`, saved with its replay command, and the signatures
        of the cases it stands for, `of`: a shrink settles the role of the wrong inputs); its report."""
        path = self.save(case, v)
        rec: dict[str, Any] = {
            "defect": sig,
            "test_id": test_id,
            "area": area.name,
            "backend": self.name,
            "backend_version": self.runner.version,
            "profile": self.profile,
            "time": time.time(),
            "cases": cases,
            "shrunk": shrunk,
            "of": of,
            "canonical": canonical(case),
            "size": case.size(),
            "dtype": case.dtype,
            **v.to_json(),
            "case": case.to_text(),
            "case_file": str(path),
            "replay": self.replay_command(path),
        }
        if self.results is not None:
            self.results.append(rec)
        return (
            f"{v.status.upper()} {sig}: {cases} case(s)\n  {v.message}\n\n"
            f"{case.to_text().split('---')[0]}\nreplay: {self.replay_command(path)}"
        )

    def _verdict(self, status: str, oracle: str, message: str, kind: str = "", culprit: str = "") -> Held:
        v = (status, oracle, message, kind, culprit)
        return self._verdicts.setdefault(v, v)

    def save(self, case: Case, v: Verdict) -> Path:
        d = self.findings / self.name
        path = d / f"{case.area}-{v.oracle or v.status}-{case.id}.case"
        if path not in self.saved:
            d.mkdir(parents=True, exist_ok=True)
            path.write_text(case.to_text())
            self.saved.add(path)
        return path.resolve()

    def replay_command(self, path: Path) -> str:
        return f"gradcert replay {path} --backend {self.spec}{self._on()}"

    def _on(self) -> str:
        """The replay command's device option: none on the CPU."""
        return "" if self.device == "cpu" else f" --device {self.device}"
