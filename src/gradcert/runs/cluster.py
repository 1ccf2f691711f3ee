"""`gradcert fuzz --engine ray`: a night of fuzzing cut into shards that run as Ray tasks.

A shard is one certification test drawing seeded cases for a slice of time, from seeds of its
own (the night's seed, the test and the shard's number). The night's plan (its seed, how many
rounds of shards, each shard's slice) is fixed when it starts and written to the results file, so
that a driver killed and started again with the same results file runs only the shards not yet
finished.

Workers judge; the driver alone writes. Each shard is a streaming task that yields its cases'
verdict records as they are judged, in batches (stamped with the worker's host and pid); the driver
appends each to the results file unless that case is on record already (a retried shard draws the same seeds),
and marks the shard done once its last verdict is written. Findings from every worker are grouped
by signature (`defects.py`) at the driver, so that one defect met on many workers is one defect,
and each new one is shrunk once, by a Ray task, at the end of the night (all of them within
`--shrink-seconds` of wall clock). SIGINT and SIGTERM stop the night in any phase (they set a flag
the driver checks between Ray calls: a handler that raised inside `ray.get` came out as a
SystemError): INCOMPLETE, 130 / 143, and the next run resumes it, shrinking what was left.

A shard whose worker dies is run again from the first case whose verdict did not arrive, that
case alone first, in another worker, then on for at least as long as the verdicts lost with the
worker took, sending each verdict as it is judged: the case is recorded as a `crash` only if it kills that
worker too, and the shard goes on after it either way. (Inside a worker, a backend other than the
reference runs in a process of its own as in every run, so a backend's own crash is a verdict
there already; what kills a Ray worker is the worker itself dying: the reference in process, an
out-of-memory kill, a node lost.)

Without `--address`, `ray.init` starts a local cluster of `--workers` CPUs (what the tests use).
With one, every node needs gradcert (and the backend's framework) installed, and the results file,
findings and report are the driver's.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gradcert.conformance.defects import known_defects, signature, unlocalized
from gradcert.conformance.results import ResultsFile, progress_path, read_records, unsupported_record
from gradcert.conformance.verdicts import FAILING, Status
from gradcert.runs import lifecycle
from gradcert.runs.ending import findings_index, finish
from gradcert.runs.options import Render, RunOptions, areas

SLICE = 20.0  # the longest a shard draws for: what a dead worker or a killed driver costs again
# a shard's verdicts go to the driver in batches of this many seconds' worth: one object each to
# move through Ray and to fetch, not one a verdict (what a dead worker loses of them is judged again)
BATCH = 0.5
# seconds past the night's shrinking time after which a shrink task still running is cancelled
STRAGGLE = 30.0


class ClusterError(ValueError):
    """A cluster that cannot be used (Ray missing, an address that does not answer): one line."""


@dataclass(frozen=True)
class Options:
    """What a worker needs to judge a shard (sent with every task: small, picklable, hashable)."""

    backend: str
    isolate: bool | None
    timeout: float
    db: str | None
    shrink_seconds: float = 30.0
    device: str = "cpu"

    @property
    def gpus(self) -> int:
        """GPUs a task asks Ray for: one on `--device gpu` (Ray places it on a node that has one)."""
        return int(self.device == "gpu")

    def replay(self, what: str) -> str:
        """The command that replays `what` (a case file, or a drawn case's name)."""
        on = "" if self.device == "cpu" else f" --device {self.device}"
        return f"gradcert replay {what} --backend {self.backend}{on}"


@dataclass(frozen=True)
class Plan:
    """A night: its seed, the tests it fuzzes, rounds of one shard per test, each `slice` seconds."""

    seed: int
    tests: tuple[str, ...]
    rounds: int
    slice: float

    def shards(self) -> list[tuple[str, int]]:
        """(test id, round) of every shard, round by round (every test gets its first shard, the
        one that replays the example database, before any gets a second)."""
        return [(t, r) for r in range(self.rounds) for t in self.tests]

    def base(self, test_id: str, r: int) -> int:
        return int.from_bytes(hashlib.sha256(f"{self.seed}/{test_id}/{r}".encode()).digest()[:6])


def shard_name(test_id: str, r: int) -> str:
    return f"{test_id}#{r}"


# --- the worker side -----------------------------------------------------------------------------


class _Sink:
    """A session's results file in a worker: the records of the case just judged, for the driver."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def append(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def close(self) -> None:
        pass

    def take(self) -> list[dict[str, Any]]:
        out, self.records = self.records, []
        return out


_STATE: dict[Options, tuple[Any, Any, _Sink]] = {}


def _state(opts: Options) -> tuple[Any, Any, _Sink]:
    """The session (its backend, its isolated runner) and search of this worker process: made at
    its first shard, kept for every later one."""
    if opts not in _STATE:
        from gradcert.conformance.judging import Search
        from gradcert.conformance.session import Session

        # the driver saves each defect's case: a worker's session never does, and a folder made
        # here would outlive the worker (Ray ends its workers by a signal)
        findings = Path(tempfile.gettempdir()) / f"gradcert-worker-{os.getpid()}"
        session = Session(opts.backend, None, findings, "nightly", opts.isolate, opts.timeout, device=opts.device)
        sink = _Sink()
        session.results = sink  # type: ignore[assignment]
        search = Search(examples=0, derandomize=False, db=opts.db, shrink_seconds=opts.shrink_seconds)
        _STATE[opts] = (session, search, sink)
    return _STATE[opts]


def _test(session: Any, test_id: str) -> tuple[Any, Any, str, Any]:
    """The area, narrowed features, key and strategy maker of a certification test."""
    from functools import partial

    from gradcert.conformance.areas import spec, strategy

    area, features, key = spec(test_id)
    narrowed = features.narrow(session.capabilities)
    return area, narrowed, key, partial(strategy, narrowed, area.order)


def judge_shard(
    opts: Options, test_id: str, base: int, start: int, seconds: float, replay: bool, one: bool, batch: float = BATCH
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Judge test `test_id`'s seeded cases from number `start` on for `seconds` (`one`: only case
    `start`), the example database's cases for the test first where `replay`. Yields the verdict
    records in batches: (the number of the batch's last case, its records), -1 for the database's."""
    from gradcert.conformance.judging import database, draw_and_check
    from gradcert.generators.coverage import Tally

    session, search, sink = _state(opts)
    area, features, key, strategy = _test(session, test_id)
    worker = {"worker": f"{socket.gethostname()}:{os.getpid()}"}
    if replay and opts.db:
        search._replay(session, test_id, area, key, strategy(), database(opts.db), {})
        yield -1, [{**r, **worker} for r in sink.take()]
    t0 = sent = time.monotonic()
    k = start
    tally = Tally()
    while k == start or (not one and time.monotonic() - t0 < seconds):
        tally.pairs.update(draw_and_check(session, test_id, area, features, k, (base << 24) + k)[3])
        tally.cases += 1
        if time.monotonic() - sent >= batch:
            yield k, [{**r, **worker} for r in sink.take()]
            sent = time.monotonic()
        k += 1
    session.coverage(test_id, area, tally)  # (the shard's: a report adds the shards' up)
    if sink.records:
        yield k - 1, [{**r, **worker} for r in sink.take()]


def shrink_defect(opts: Options, record: dict[str, Any], count: int, until: float | None = None) -> dict[str, Any]:
    """The defect record of the failure `record` (a verdict record): its case shrunk once, as a
    certify run shrinks it, where the search drew it (a database's case is kept as it is), by
    wall-clock time `until` (`time.time()`) at the latest."""
    session = _state(opts)[0]
    session.deadline = until
    try:
        return _shrink_defect(opts, record, count)
    finally:
        session.deadline = None


def _shrink_defect(opts: Options, record: dict[str, Any], count: int) -> dict[str, Any]:
    from gradcert.conformance.judging import _UNSHRUNK, Found, database, draw
    from gradcert.generators.case import parse_case
    from gradcert.generators.choices import Seeded, Simplest

    session, search, sink = _state(opts)
    area, features, key, strategy = _test(session, record["test_id"])
    sig = record["signature"]
    drawn = record.get("draw")
    if drawn:
        chooser = Simplest() if drawn == "simplest" else Seeded(int(drawn[5:], 16))
        case, choices = draw(chooser, features, area.order, area.name), chooser.choices
    else:
        case, choices = parse_case(record["case"]), None
        case.area = area.name
    # (a crash or hang is not judged again here: it would kill or hold this worker)
    v = session.judge(area, case) if record["status"] not in _UNSHRUNK else None
    shrunk = False
    if v is not None and v.status in FAILING and v.kind and v.signature == sig:
        store = database(opts.db) if opts.db else None
        case, v, shrunk = search.minimal(session, area, key, strategy, Found(v, case, choices, count), sig, store)
    else:  # (it did not fail so again: the night's own verdict and case stand)
        from gradcert.conformance.verdicts import Verdict

        v = Verdict(**{f: record[f] for f in ("status", "oracle", "message", "kind", "culprit") if f in record})
    final = v.signature if shrunk else sig  # (the shrink settles the role)
    session.defect(record["test_id"], area, final, case, v, count, shrunk, [sig])
    (rec,) = sink.take()
    return rec


# --- the driver ----------------------------------------------------------------------------------


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ClusterError("--engine ray needs Ray: pip install 'gradcert[cluster]'") from None
    return ray


def connect(ray: Any, address: str, workers: int) -> None:
    """Join the cluster at `address` ("auto": the one this machine belongs to) or, without one,
    start a local cluster of `workers` CPUs. An address that does not answer is a ClusterError."""
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
    if not address:  # ("local": a cluster of its own, never one a `ray start` left running)
        ray.init(address="local", num_cpus=workers, **quiet)
        return
    if address != "auto":
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except (OSError, ValueError) as e:
            raise ClusterError(f"cannot reach the Ray cluster at {address}: {e}") from None
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClusterError(f"cannot join the Ray cluster at {address}: {said}") from None


@dataclass
class Night:
    """What the results file holds of the night being run: its plan, where its records start, the
    shards finished and the cases on record."""

    plan: Plan | None = None
    offset: int = 0
    done: set[str] | None = None
    seen: set[tuple[str, str]] | None = None
    # signature -> [first failing record, count], and the defects recorded (shrunk) already
    failures: dict[str, list[Any]] = field(default_factory=dict)
    shrunk: set[str] = field(default_factory=set)


def resume(results: Path) -> Night:
    """The unfinished night on record in `results` (a Ray night whose end record is missing or
    says incomplete), or an empty Night where there is none."""
    night = Night()
    for n, r in enumerate(read_records([results])):
        if r.get("run") == "start":
            plan = r.get("plan")
            night = Night(None if plan is None else Plan(**{**plan, "tests": tuple(plan["tests"])}), n, set(), set())
        elif night.plan is None:
            continue
        elif r.get("run") == "end" and r.get("complete"):
            night = Night()
        elif "shard_done" in r:
            assert night.done is not None
            night.done.add(r["shard_done"])
        elif "defect" in r:
            night.shrunk.add(r["defect"])
            night.shrunk.update(r.get("of", ()))
        elif r.get("case_id"):
            assert night.seen is not None
            night.seen.add((r["test_id"], r.get("draw") or r["case_id"]))
            if r.get("signature") and r["status"] in FAILING:
                night.failures.setdefault(r["signature"], [r, 0])[1] += 1
    return night


@dataclass
class _Shard:
    """A shard in flight: the case it is expected to judge next, the case it judges alone (one that
    killed a worker), when it began."""

    test_id: str
    r: int
    began: float
    next: int = 0
    suspect: int | None = None
    heard: float = 0.0  # when its last batch arrived
    submitted: float = 0.0  # when its task in flight was submitted
    started: bool = False  # whether that task has sent a verdict
    # after a dead worker: until when (monotonic) it goes on, to judge again what died with it
    owed: float = 0.0

    def restarted(self, now: float) -> None:
        """Push the deadline `owed` on by the time a replacement worker took to start judging (its
        task dead before its first verdict, or that verdict now in): the deadline is the judging owed,
        and a backend that kills every worker often would otherwise keep the shard going forever."""
        if self.owed and not self.started and self.suspect is None:
            self.owed += now - self.submitted

    @property
    def name(self) -> str:
        return shard_name(self.test_id, self.r)


class Writer:
    """The driver's half of every verdict: written once (a retried shard's cases judged before its
    worker died, or a case of an earlier run of the night, are on record already), and failures
    grouped by signature across every worker."""

    def __init__(self, results: Path, seen: set[tuple[str, str]], failures: dict[str, list[Any]] | None = None) -> None:
        self.out = ResultsFile(results)
        self.seen = seen
        self.failures: dict[str, list[Any]] = failures or {}  # signature -> [first failing record, count]

    def write(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            if "case_id" not in r:  # a shard's coverage: every shard's is added up
                self.out.append(r)
                continue
            key = (r["test_id"], r.get("draw") or r["case_id"])
            if key in self.seen:
                continue
            self.seen.add(key)
            self.out.append(r)
            if r.get("signature") and r["status"] in FAILING:
                self.failures.setdefault(r["signature"], [r, 0])[1] += 1


class Driver(Writer):
    """Runs a plan's shards on the cluster, `workers` at a time, writing what comes back."""

    def __init__(self, ray: Any, opts: Options, plan: Plan, night: Night, results: Path, workers: int) -> None:
        super().__init__(results, night.seen or set(), night.failures)
        self.ray, self.opts, self.plan, self.workers = ray, opts, plan, workers
        self.done = night.done or set()
        shard = ray.remote(num_returns="streaming", max_retries=0)(judge_shard)
        self._shard = shard.options(num_cpus=1, num_gpus=opts.gpus)

    def submit(self, shard: _Shard, start: int, one: bool = False) -> Any:
        """Run `shard` from case `start` on (`one`: that case alone) for what is left of its slice
        (a shard continued after a dead worker does not start its slice again)."""
        shard.next, shard.suspect = start, start if one else None
        left = max(self.plan.slice - (time.monotonic() - shard.began), shard.owed - time.monotonic())
        shard.heard = shard.submitted = time.monotonic()
        shard.started = False
        replay = shard.r == 0 and start == 0 and not one
        base = self.plan.base(shard.test_id, shard.r)
        batch = 0.0 if shard.owed else BATCH  # (after a dead worker: every verdict sent as judged)
        return self._shard.remote(self.opts, shard.test_id, base, start, left, replay, one, batch)

    def run(self, progress: lifecycle.Progress, flag: lifecycle.Flag) -> None:
        """Every shard not yet done, `workers` in flight; a shard whose worker died is continued as
        the module docstring says. Stops (`Interrupted`) where `flag` says a signal came."""
        pending = iter([s for s in self.plan.shards() if shard_name(*s) not in self.done])
        flight: dict[Any, _Shard] = {}  # a streaming task -> the shard it runs

        def start_next() -> None:
            for test_id, r in itertools.islice(pending, 1):
                shard = _Shard(test_id, r, time.monotonic())
                flight[self.submit(shard, 0 if r == 0 else 1)] = shard  # (case 0, the simplest: once a test)

        for _ in range(self.workers):
            start_next()
        while flight:
            ready, _ = self.ray.wait(list(flight), num_returns=1, timeout=0.5, fetch_local=False)
            flag.check()
            progress.tick()
            for gen in ready:
                shard = flight[gen]
                try:
                    k, records = self.ray.get(next(gen))
                except StopIteration:  # the task is over
                    del flight[gen]
                    if shard.suspect is not None:  # a suspect case judged alone: the shard goes on after it
                        flight[self.submit(shard, shard.next)] = shard
                        continue
                    self.out.append({"shard_done": shard.name, "time": time.time(), "next": shard.next})
                    self.done.add(shard.name)
                    start_next()
                    continue
                except self.ray.exceptions.RayTaskError as e:  # gradcert's own code raised there: stop, resumable
                    said = str(e.cause if hasattr(e, "cause") else e).strip().splitlines()
                    raise ClusterError(f"shard {shard.name} raised: {said[0] if said else e}") from None
                except self.ray.exceptions.RayError as e:  # its worker died (the error is its last item)
                    del flight[gen]
                    # what it judged since its last batch died with it: the shard goes on at least
                    # that long again (the case that killed it among them), verdict by verdict
                    now = time.monotonic()
                    if not shard.owed:
                        shard.owed = now + 2 * (now - shard.heard) + 2 * BATCH
                    else:  # (its later tasks send each verdict as judged: only their start is lost)
                        shard.restarted(now)
                    if shard.suspect is not None:  # the case killed a second worker: a crash
                        self.write([self.crash(shard.test_id, shard.r, shard.suspect, e)])
                        flight[self.submit(shard, shard.suspect + 1)] = shard
                    else:  # that case alone, in another worker
                        flight[self.submit(shard, shard.next, one=True)] = shard
                    continue
                self.write(records)
                if k >= 0:
                    shard.next = k + 1
                shard.heard = time.monotonic()
                shard.restarted(shard.heard)
                shard.started = True

    def crash(self, test_id: str, r: int, k: int, e: Exception) -> dict[str, Any]:
        """The record of case `k` of shard (test_id, r), which killed two workers."""
        from gradcert.conformance.areas import spec
        from gradcert.conformance.judging import redraw

        base = self.plan.base(test_id, r)
        drawn = "simplest" if k == 0 else f"seed:{(base << 24) + k:x}"
        case = redraw(test_id, drawn, _capabilities(self.opts.backend))
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        area = spec(test_id)[0].name
        return {
            "test_id": test_id,
            "area": area,
            "backend": _name(self.opts.backend),
            "profile": "nightly",
            "time": time.time(),
            "status": Status.CRASH,
            "oracle": "backend",
            "message": f"the case killed two Ray workers: {said}",
            "kind": "crash",
            "culprit": unlocalized(area, "backend"),
            "signature": signature(unlocalized(area, "backend"), "crash"),
            "draw": drawn,
            "case_id": case.id,
            "case": case.to_text(),
            "replay": self.opts.replay(f"'{test_id}[{drawn}]'"),
            "worker": "",
        }

    def shrink(
        self, new: list[str], findings: Path, progress: lifecycle.Progress, flag: lifecycle.Flag, seconds: float
    ) -> None:
        """One Ray task per new defect: its case shrunk, its record written, its case saved here;
        every shrink over within `seconds` of wall clock (the run's total; a task still running
        `STRAGGLE` seconds after is cancelled and its defect kept as found). The live line goes
        on ("shrinking defect 3/12"); a signal stops it (`Interrupted`), the defects not yet
        recorded shrunk on the next run."""
        task = self.ray.remote(max_retries=1)(shrink_defect).options(num_cpus=1, num_gpus=self.opts.gpus)
        until = time.time() + seconds
        refs = {task.remote(self.opts, *self.failures[sig], until): sig for sig in new}
        left, ready_last = dict(refs), False
        notes = ResultsFile(progress_path(self.out.path))
        while left:
            if not ready_last:  # (the live line's "shrinking defect i/n": `lifecycle.Follow`)
                at = len(refs) - len(left) + 1
                notes.append({"shrinking": "", "index": at, "of": len(refs), "time": time.time()})
            ready, _ = self.ray.wait(list(left), num_returns=1, timeout=0.5)
            ready_last = bool(ready)
            flag.check()
            progress.tick()
            if not ready and time.time() > until + STRAGGLE:
                ready = list(left)
                for ref in ready:
                    self.ray.cancel(ref, force=True)
            for ref in ready:
                sig = left.pop(ref)
                self.out.append(self._shrunk(ref, sig, findings))
        notes.append({"shrinking": "", "index": 0, "of": 0, "time": time.time()})
        notes.close()

    def _shrunk(self, ref: Any, sig: str, findings: Path) -> dict[str, Any]:
        """The defect record a shrink task `ref` returned (as found, where it failed), its case
        saved under `findings`."""
        try:
            rec: dict[str, Any] = self.ray.get(ref, timeout=0)
        except (self.ray.exceptions.RayError, self.ray.exceptions.GetTimeoutError) as e:
            first = self.failures[sig][0]
            print(f"gradcert: shrinking {sig} failed ({type(e).__name__}); kept as found", file=sys.stderr)
            rec = {**first, "defect": sig, "of": [sig], "cases": self.failures[sig][1], "shrunk": False}
        path = findings / rec["backend"] / Path(rec.get("case_file") or f"{rec['case_id']}.case").name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rec["case"])
        rec["case_file"] = str(path.resolve())
        rec["replay"] = self.opts.replay(str(path.resolve()))
        return rec


def _name(spec: str) -> str:
    from gradcert.backends.registry import backend_name

    return backend_name(spec)


def _capabilities(spec: str) -> frozenset[str]:
    from gradcert.backends.registry import resolve

    return frozenset(resolve(spec).capabilities)


def run(opts: RunOptions, render: Render) -> int:
    """`gradcert fuzz --engine ray`; `render` writes the report where `opts.report` asks for one."""
    from gradcert.backends.registry import resolve
    from gradcert.conformance.areas import spec, tests
    from gradcert.conformance.judging import database

    ray = _ray()
    chosen = areas(opts.areas)
    name = _name(opts.backend)
    results = Path(opts.results or f"reports/{name}-fuzz.jsonl")
    findings = Path(opts.findings or results.parent / "findings")
    lifecycle.check_outputs(results, Path(opts.report or results.with_suffix(".html")), findings)
    known = {name: known_defects(name)}  # (a bad file: now, in one line)
    db = opts.db if opts.db.startswith(("redis://", "rediss://")) else str(Path(opts.db).resolve())
    database(db)  # (unreachable: now, in one line)
    backend = resolve(opts.backend)
    workers = (os.cpu_count() or 1) if opts.workers == "auto" else int(opts.workers)
    isolate = opts.isolated
    task = Options(opts.backend, isolate, opts.timeout, db, opts.shrink_seconds, opts.device)
    runnable: list[tuple[str, Any]] = []
    lacking: list[tuple[str, Any]] = []
    for test_id in tests():
        area = spec(test_id)[0]
        if area.name in chosen:
            (runnable if area.needs <= backend.capabilities else lacking).append((test_id, area))
    index = findings_index(findings)
    with lifecycle.exclusive(results), lifecycle.signals_flag() as flag:
        signum = None
        progress = lifecycle.Progress(lifecycle.Follow(results), None, budget=opts.minutes * 60)
        night = Night()
        out: ResultsFile | None = None
        try:
            connect(ray, opts.address, workers)  # (unreachable: one line, before anything is written)
            flag.install()  # (Ray's `init` may have put handlers of its own in place)
            flag.check()
            if task.gpus and not ray.cluster_resources().get("GPU"):  # (its tasks would wait forever)
                raise ClusterError(f"--device gpu: the Ray cluster at {opts.address or 'local'} has no GPU")
            night = resume(results)
            if night.plan is None:
                total = opts.minutes * 60 * workers
                slice_s = min(SLICE, max(1.0, total / max(1, len(runnable))))
                rounds = max(1, round(total / (slice_s * max(1, len(runnable)))))
                plan = Plan(int.from_bytes(os.urandom(6)), tuple(t for t, _ in runnable), rounds, slice_s)
                night = Night(plan, sum(1 for _ in read_records([results])), set(), set())
                start = {"backend": name, "profile": "nightly", "planned": None, "engine": "ray"}
                lifecycle.record_run(results, {"run": "start", **start, "plan": asdict(plan)})
                f = ResultsFile(results)
                for test_id, area in lacking:
                    lacks = f"{backend.name} lacks {', '.join(sorted(area.needs - backend.capabilities))}"
                    f.append(unsupported_record(backend, area.name, test_id, lacks, "nightly", 0))
                f.close()
            else:
                assert night.done is not None
                plan = night.plan
                print(f"resuming the night on record: {len(night.done)} of {len(plan.shards())} shards done")
            driver = Driver(ray, task, plan, night, results, workers)
            out = driver.out
            driver.run(progress, flag)
            known_here = known[name]
            new = [s for s in driver.failures if s not in known_here and s not in index and s not in night.shrunk]
            driver.shrink(new, findings, progress, flag, opts.shrink_seconds)
            progress.end()
        except lifecycle.Interrupted as e:
            signum = e.signum
            progress.end()
        finally:
            if out is not None:
                out.close()
            ray.shutdown()
        if night.plan is None:  # (stopped before the night began: nothing of it on record)
            print(f"INCOMPLETE ({lifecycle.signal_name(signum or 0)}): stopped before the night began")
            return lifecycle.exit_for(signum)
        why = lifecycle.signal_name(signum) if signum else None
        end = {"run": "end", "complete": signum is None, "planned": None, "judged": progress.follow.n, "signal": why}
        lifecycle.record_run(results, {**end, "exit": lifecycle.exit_for(signum) if signum else 0})
    return finish(opts, render, results, findings, index, known, night.offset, progress.follow.n, signum, "on Ray")
