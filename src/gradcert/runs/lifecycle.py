"""A run of the certification tests as `gradcert certify` and `gradcert fuzz` make it: outputs
checked before anything runs, one live run per results file, the tests in a child pytest (its own
process group, so that no xdist worker outlives the run), a live progress line, honest endings.

The child's own output goes to `RESULTS.log` (`-v` shows it); this process follows the results
file and prints what a person reads: the progress line, then the summary (areas x statuses, one
block per defect: `ending.py`). A run records its start (cases planned) and its end (complete or
not, why, cases judged) in the results file, so that a report rendered from it later says
INCOMPLETE too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, NamedTuple

from gradcert.conformance import lifeline
from gradcert.conformance.results import ResultsFile, progress_path, read_records
from gradcert.conformance.verdicts import STATUSES
from gradcert.runs.options import EXIT_FAIL, EXIT_SIGINT, EXIT_SIGTERM, RunError


def check_outputs(results: Path, report: Path, findings: Path) -> int:
    """Every output can be written, and the results file (resumed) reads as JSON lines: else one
    line naming what is wrong, before anything runs or is overwritten. Returns the cases judged on
    record (a resumed run's progress starts there)."""
    for path, what in ((results, "results file"), (report, "report")):
        _writable_file(path, what)
    _writable_dir(findings, "findings folder")
    # (a ResultsFileError names the file and line)
    return len({(r["test_id"], r.get("draw") or r["case_id"]) for r in read_records([results]) if r.get("case_id")})


def _writable_dir(d: Path, what: str) -> None:
    probe = d
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise RunError(f"{d}: the {what} cannot be made: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RunError(f"{d}: the {what} is not writable ({probe} is read-only)")


def _writable_file(p: Path, what: str) -> None:
    if p.is_dir():
        raise RunError(f"{p}: the {what} is a folder")
    if p.exists() and not os.access(p, os.W_OK):
        raise RunError(f"{p}: the {what} is not writable")
    _writable_dir(p.parent, f"{what}'s folder")


@contextmanager
def exclusive(results: Path) -> Iterator[None]:
    """Hold `RESULTS.lock` for the run (`lifeline.py`): a second run on a results file that a live
    run is writing is refused (it would judge every case again beside it, appending duplicates).
    The lock is taken exclusively, then shared with the run's writers (the child pytest and its
    workers take it shared at their start, from GRADCERT_RESULTS_LOCK): it lasts while any of them
    lives, however this process ends."""
    try:
        fd = lifeline.start(results)
    except lifeline.Held as e:
        raise RunError(f"{results}: a live run (pid {e.pid}) is writing this results file") from None
    before = os.environ.get(lifeline.LOCK)
    os.environ[lifeline.LOCK] = str(lifeline.lock_path(results).resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(lifeline.LOCK, None)
        else:
            os.environ[lifeline.LOCK] = before
        lifeline.release(fd)  # (the file stays, empty of meaning once no one holds it)


class Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def signals_raise() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` in this process for the run's duration."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class Flag:
    """The signal (SIGINT, SIGTERM) that asked a run to stop, if one did: `check` raises
    `Interrupted` for it where the run can stop cleanly."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def handler(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum

    def install(self) -> None:
        """(Again, where a library called since, Ray's `init`, installed handlers of its own.)"""
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self.handler)

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)


@contextmanager
def signals_flag() -> Iterator[Flag]:
    """SIGINT and SIGTERM set the yielded `Flag` for the run's duration, and raise nothing where
    they arrive: a handler that raises inside a library's native call (Ray's `get` and `wait`)
    comes out of it as a SystemError, not as the signal."""
    flag = Flag()
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    flag.install()
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Stop the child pytest and every process of its group (its xdist workers and their backend
    workers): SIGTERM, then SIGKILL after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # the group's other members may still be on their way out
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


class Follow:
    """Counts the case verdicts appended to a results file since it was opened, reading only what
    is new; the defects (signatures of failing and known cases) met so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = path.stat().st_size if path.exists() else 0
        self.notes = progress_path(path)  # (what is being shrunk)
        self.notes_pos = self.notes.stat().st_size if self.notes.exists() else 0
        self.counts: Counter[str] = Counter()
        self.signatures: set[str] = set()
        self.n = 0
        self.shrinking: dict[str, tuple[int, int]] = {}  # test id -> (the defect it shrinks, of how many)

    def poll(self) -> None:
        for r in self._new(self.notes, "notes_pos"):
            if r["of"]:  # (of 0: the shrinking is over)
                self.shrinking[r["shrinking"]] = (r["index"], r["of"])
            else:
                self.shrinking.pop(r["shrinking"], None)
        for r in self._new(self.path, "pos"):
            if "defect" in r:
                self.shrinking.pop(r.get("test_id", ""), None)
            elif "case_id" in r:
                self.counts[r["status"]] += 1
                self.n += 1
                if r.get("signature"):
                    self.signatures.add(r["signature"])

    def _new(self, path: Path, pos: str) -> Iterator[dict[str, Any]]:
        """The records appended to `path` since offset attribute `pos`, which moves past them."""
        if not path.exists():
            return
        with open(path) as f:
            f.seek(getattr(self, pos))
            while True:
                line = f.readline()
                if not line.endswith("\n"):
                    break  # a line still being written: read it next time
                setattr(self, pos, f.tell())
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


class Progress:
    """One live line on a terminal (cases judged / planned, defects so far, elapsed, ETA); where
    the output is not a terminal (CI), the same line every `every` seconds."""

    def __init__(self, follow: Follow, planned: int | None, budget: float | None = None, every: float = 30.0) -> None:
        self.follow, self.planned, self.budget = follow, planned, budget
        self.t0 = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.every, self.last = every, 0.0
        self.done_before = 0  # cases judged by earlier runs on this file (a resumed run)
        self.shown: dict[str, tuple[int, int]] = {}  # the shrinking last printed (not a terminal)

    def line(self) -> str:
        f = self.follow
        elapsed = time.monotonic() - self.t0
        judged = f.n + self.done_before
        counts = ", ".join(f"{s} {f.counts[s]}" for s in STATUSES if f.counts[s]) or "starting"
        text = f"{judged}" + (f"/{self.planned}" if self.planned else "") + f" cases ({counts})"
        rate = f.n / elapsed if elapsed > 0 else 0.0
        text += f" | {len(f.signatures)} defect(s) | {rate:.1f} cases/s | {_clock(elapsed)}"
        if f.shrinking:  # (tests shrinking now: the defect each is at, of how many it found)
            at, of = (sum(x) for x in zip(*f.shrinking.values()))
            text += f" | shrinking defect {at}/{of}"
        if self.budget is not None:
            text += f" | {_clock(max(0.0, self.budget - elapsed))} left"
        elif self.planned and f.n and judged < self.planned:
            text += f" | ETA {_clock(elapsed / f.n * (self.planned - judged))}"
        return text

    def tick(self) -> None:
        self.follow.poll()
        now = time.monotonic()
        if self.tty:
            sys.stderr.write("\r" + self.line()[:150].ljust(100))
            sys.stderr.flush()
        elif now - self.last >= self.every or (self.follow.shrinking != self.shown and now - self.last >= 1.0):
            # (and where the tests start shrinking another defect)
            self.last, self.shown = now, dict(self.follow.shrinking)
            print(self.line(), file=sys.stderr, flush=True)

    def end(self) -> None:
        self.follow.poll()
        if self.tty:
            sys.stderr.write("\r" + self.line()[:150].ljust(100) + "\n")
            sys.stderr.flush()


def _clock(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Ended(NamedTuple):
    code: int  # the child pytest's exit status
    signum: int | None  # the signal that stopped the run, or None
    cut: bool = False  # stopped at `until` (a budget's end), not by a signal


def run_child(
    cmd: list[str],
    env: dict[str, str],
    log: IO[str],
    progress: Progress,
    verbose: bool = False,
    until: float | None = None,
) -> Ended:
    """Run the child pytest to its end, to a signal, or to `until` (`time.monotonic()`: a budget's
    hard end, where the child overran its own deadline)."""
    proc = subprocess.Popen(
        cmd,
        stdout=None if verbose else log,
        stderr=subprocess.STDOUT if not verbose else None,
        start_new_session=True,  # its own process group: stopped whole
        env={**env, lifeline.LOCK: os.environ[lifeline.LOCK]} if lifeline.LOCK in os.environ else env,
        preexec_fn=lifeline.preexec(),  # (killed by the kernel when this process dies, by SIGKILL too)
    )
    try:
        with signals_raise():
            while proc.poll() is None:
                progress.tick()
                if until is not None and time.monotonic() > until:
                    stop(proc, grace=5.0)
                    progress.end()
                    return Ended(proc.returncode if proc.returncode is not None else -signal.SIGKILL, None, True)
                time.sleep(0.25)
    except Interrupted as e:
        stop(proc)
        progress.end()
        return Ended(proc.returncode if proc.returncode is not None else -e.signum, e.signum)
    finally:
        if proc.poll() is None:  # (anything else that ended this loop)
            stop(proc)
    progress.end()
    return Ended(proc.returncode, None)


def record_run(results: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Append a run's start or end record; returns it."""
    rec = {"run": record.pop("run"), "time": time.time(), **record}
    f = ResultsFile(results)
    try:
        f.append(rec)
    finally:
        f.close()
    return rec


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def exit_for(signum: int | None) -> int:
    """The exit status of a run that did not finish: 130 / 143 for SIGINT / SIGTERM, else 1."""
    return {int(signal.SIGINT): EXIT_SIGINT, int(signal.SIGTERM): EXIT_SIGTERM}.get(signum or 0, EXIT_FAIL)
