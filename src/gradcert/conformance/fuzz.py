"""`gradcert fuzz`: the nightly profile within a time budget, with a live progress line.

The certification tests run in a child pytest (across `--workers`, `runs.py`), each drawing new
cases for its share of the budget and judging every one; hypothesis's example database replays
every failure found before first. At the end the night's failures are grouped into distinct
defects (`defects.py`); a defect is NEW where it is neither one of the backend's known defects nor
in the findings folder's index of earlier nights (`index.json`: signature -> minimal case file).
Interrupted, everything written stays and the summary says INCOMPLETE; running again resumes.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

from . import runs
from .areas import AREAS, PYTEST_ENV, command_line
from .defects import known_defects
from .results import read_records

TESTS_PER_AREA = 2


def run(args: Any) -> int:
    from ..reports.summary import load

    areas = [a.strip() for a in args.areas.split(",") if a.strip()] if args.areas else list(AREAS)
    results = Path(args.results or f"reports/{args.backend_name}-fuzz.jsonl")
    findings = Path(args.findings or results.parent / "findings")
    runs.check_outputs(results, Path(args.report or results.with_suffix(".html")), findings)
    known = {args.backend_name: known_defects(args.backend_name)}  # (a bad file: now, in one line)
    workers = 1 if args.workers in ("", "1") else args.workers
    n_workers = int(workers) if str(workers).isdigit() else 2
    total = args.minutes * 60
    budget = max(1.0, total * n_workers / (TESTS_PER_AREA * len(areas)))
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
    index = _index(findings)
    with runs.exclusive(results):
        offset = sum(1 for _ in read_records([results]))
        runs.record_run(results, {"run": "start", "backend": args.backend_name, "profile": "nightly", "planned": None})
        progress = runs.Progress(runs.Follow(results), None, budget=total)
        with open(results.with_suffix(".log"), "w") as log:
            code, signum = runs.run_child(cmd, dict(os.environ, **PYTEST_ENV), log, progress)
        complete = signum is None and code in (0, 1)
        why = runs.signal_name(signum) if signum else (None if complete else f"pytest exited with status {code}")
        end = {"run": "end", "complete": complete, "planned": None, "judged": progress.follow.n, "signal": why}
        runs.record_run(results, {**end, "exit": code})
    night = load(itertools.islice(read_records([results]), offset, None))
    found = runs.print_summary(night, known)
    new = [d for d in found if d.new and d.signature not in index]
    for d in new:
        if d.example is not None and d.example.get("case_file"):
            index[d.signature] = str(d.example["case_file"])
    if new:
        findings.mkdir(parents=True, exist_ok=True)
        (findings / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    print(
        f"\nfuzz {args.backend}: {progress.follow.n} cases; {len(new)} new defect(s); results: {results}; "
        f"findings: {findings}"
    )
    if args.report:
        from ..reports.html import write

        print(f"report: {write([results], args.report)}")
    if not complete:
        print(f"INCOMPLETE ({why}): run the same command again to resume")
        return runs.exit_for(signum)
    return runs.EXIT_FAIL if new else runs.EXIT_OK


def _index(findings: Path) -> dict[str, str]:
    p = findings / "index.json"
    return json.loads(p.read_text()) if p.exists() else {}
