"""`gradcert fuzz`: the nightly profile within a time budget, with a live progress line.

The certification tests run in a child pytest (across `--workers`), each drawing new cases for
its share of the budget; hypothesis's example database replays every failure found before first.
This process follows the results file as it grows and shows the verdict counts, the rate and the
time left. At the end, failures are deduplicated by signature (oracle + area + the op sequence of
the smallest failing program of each test); each new signature's case stays in the findings
folder, the bigger cases met while shrinking are dropped. Interrupted,
everything written stays; running again resumes (finished cases are skipped, failures replayed).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..generators.case import parse_case
from .api import FAILING, STATUSES
from .areas import AREAS, PYTEST_ENV, command_line
from .results import read_records

TESTS_PER_AREA = 2


def signature(r: dict[str, Any]) -> str:
    return f"{r['oracle'] if r['status'] == 'fail' else r['status']} | {r['area']} | {_shape(r['case'])}"


def _shape(text: str, name: str = "<case>") -> str:
    """A case's program as the op sequence that signatures compare."""
    return " ".join(op.name for op in parse_case(text, name).program.walk() if op.name not in ("full", "yield"))


def run(args: Any) -> int:
    areas = [a.strip() for a in args.areas.split(",")] if args.areas else list(AREAS)
    results = Path(args.results or f"reports/{args.backend_name}-fuzz.jsonl")
    findings = Path(args.findings)
    workers = 1 if args.workers in ("", "1") else args.workers
    n_workers = int(workers) if str(workers).isdigit() else 2
    budget = max(1.0, args.minutes * 60 * n_workers / (TESTS_PER_AREA * len(areas)))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *command_line(
            areas, args.backend, "nightly", str(results), str(findings), args.isolate, args.timeout, str(workers)
        ),
        "--gradcert-db",
        args.db,
        "--gradcert-budget",
        f"{budget:.1f}",
    ]
    offset = sum(1 for _ in read_records([results]))
    known = _index(findings)
    on_file = _on_file(args.backend_name)  # (read before the night: a bad file fails now, in one line)
    t0 = time.monotonic()
    total = args.minutes * 60
    results.parent.mkdir(parents=True, exist_ok=True)
    log = open(results.with_suffix(".log"), "w")  # the child pytest's own output
    env = dict(os.environ, **PYTEST_ENV)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    interrupted = False
    follow = _Follow(results, offset)
    try:
        while proc.poll() is None:
            _progress(follow, t0, total)
            time.sleep(0.5)
    except KeyboardInterrupt:
        interrupted = True
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    _progress(follow, t0, total)
    sys.stderr.write("\n")
    counts: Counter[str] = Counter()
    failures = []
    for r in itertools.islice(read_records([results]), offset, None):  # (read as a stream: a night's are gigabytes)
        counts[r["status"]] += 1
        if r["status"] in FAILING:
            failures.append(r)
    new, met = _dedupe(failures, findings, known, on_file)
    print(
        f"fuzz {args.backend}: {counts.total()} cases in {time.monotonic() - t0:.0f} s: "
        + ", ".join(f"{s} {counts[s]}" for s in STATUSES if counts[s])
    )
    for sig, path in sorted(met.items()):
        print(f"KNOWN {sig}\n    on file: {path}")
    for sig, path in new.items():
        print(f"NEW {sig}\n    gradcert replay {path} --backend {args.backend}")
    print(
        f"{len(new)} new finding(s); results: {results}; findings: {findings}"
        + ("; interrupted: run again to resume" if interrupted else "")
    )
    if args.report:
        from ..reports.html import write

        print(f"report: {write([results], args.report)}")
    return 1 if new else 0


class _Follow:
    """Counts the verdicts appended to a results file since `offset` records, reading only what is new."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.skip, self.pos = path, offset, 0
        self.counts: Counter[str] = Counter()
        self.n = 0

    def poll(self) -> None:
        if not self.path.exists():
            return
        with open(self.path) as f:
            f.seek(self.pos)
            while True:
                line = f.readline()
                if not line.endswith("\n"):
                    break  # a line still being written: read it next time
                self.pos = f.tell()
                if self.skip:
                    self.skip -= 1
                    continue
                try:
                    self.counts[json.loads(line)["status"]] += 1
                    self.n += 1
                except (json.JSONDecodeError, KeyError):
                    continue


def _progress(follow: _Follow, t0: float, total: float) -> None:
    follow.poll()
    counts, n = follow.counts, follow.n
    elapsed = time.monotonic() - t0
    done = min(1.0, elapsed / total) if total else 1.0
    bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
    rate = n / elapsed if elapsed > 0 else 0.0
    left = max(0.0, total - elapsed)
    text = " ".join(f"{s} {counts[s]}" for s in STATUSES if counts[s]) or "starting"
    sys.stderr.write(f"\r[{bar}] {text} | {rate:.1f} cases/s | {int(left) // 60}:{int(left) % 60:02d} left ")
    sys.stderr.flush()


def _index(findings: Path) -> dict[str, str]:
    p = findings / "index.json"
    return json.loads(p.read_text()) if p.exists() else {}


def _on_file(backend: str) -> dict[tuple[str, str, str], str]:
    """(oracle, area, op sequence) -> case file of each of the backend's known failures
    (`known_failures/<backend>/`, named as findings are saved: the oracle, or "backend" for a
    crash, hang or error, is in the name): a night's smallest failing case that is one of them is
    not new (the first night, and every night after the findings folder was lost, reported
    PyTorch's known `pow` defect as new)."""
    from .plugin import known_cases

    out = {}
    for path in known_cases(backend):
        named = path.stem.rsplit("-", 2)
        if len(named) != 3:
            raise ValueError(f"{path}: a known failure's case is named <area>-<oracle>-<id>.case")
        area, oracle, _ = named
        out[oracle, area, _shape(path.read_text(), str(path))] = str(path)  # (a bad file: an error naming it)
    return out


def _dedupe(
    failures: list[dict[str, Any]], findings: Path, known: dict[str, str], on_file: dict[tuple[str, str, str], str]
) -> tuple[dict[str, str], dict[str, str]]:
    """One finding per test that failed: its smallest case (hypothesis shrinks towards it; the
    bigger ones on the way are dropped), deduplicated across tests by signature; new where no
    night found it before (`known`, the findings index) and it is not a known failure of the
    backend's (`on_file`). Returns the new ones and the known failures met (signature -> case file)."""
    smallest: dict[str, dict[str, Any]] = {}
    for r in failures:
        t = r["test_id"]
        if t not in smallest or r.get("size", 0) <= smallest[t].get("size", 0):
            smallest[t] = r
    best: dict[str, dict[str, Any]] = {}
    for r in smallest.values():
        sig = signature(r)
        if sig not in best or r.get("size", 0) < best[sig].get("size", 0):
            best[sig] = r
    met = {
        sig: on_file[key]
        for sig, r in best.items()
        if (key := (r.get("oracle", ""), r["area"], _shape(r["case"]))) in on_file
    }
    seen = known.keys() | met.keys()
    keep = {str(r["case_file"]) for sig, r in best.items() if sig not in seen} | set(known.values())
    for r in failures:
        f = Path(str(r.get("case_file", "")))
        if str(f) not in keep and f.exists():
            f.unlink()
    new = {sig: str(r["case_file"]) for sig, r in best.items() if sig not in seen}
    if new:
        findings.mkdir(parents=True, exist_ok=True)
        (findings / "index.json").write_text(json.dumps({**known, **new}, indent=1, sort_keys=True) + "\n")
    return new, met
