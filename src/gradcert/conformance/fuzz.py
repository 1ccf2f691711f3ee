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

from gradcert.conformance import runs
from gradcert.conformance.areas import AREAS, PYTEST_ENV, command_line
from gradcert.conformance.defects import known_defects
from gradcert.conformance.results import read_records

TESTS_PER_AREA = 2


def run(args: Any) -> int:
    if args.engine == "ray":
        from gradcert.conformance import cluster

        return cluster.run(args)
    if args.db.startswith(("redis://", "rediss://")):
        from gradcert.conformance.judging import database

        database(args.db)  # (unreachable: now, in one line)
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
            areas,
            args.backend,
            "nightly",
            str(results),
            str(findings),
            args.isolate,
            args.timeout,
            str(workers),
            args.device,
        ),
        "--gradcert-db",
        args.db,
        "--gradcert-budget",
        f"{budget:.1f}",
        "--gradcert-shrink-seconds",
        str(args.shrink_seconds),
    ]
    index = findings_index(findings)
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
    return finish(args, results, findings, index, known, offset, progress.follow.n, signum, "")


def finish(
    args: Any,
    results: Path,
    findings: Path,
    index: dict[str, str],
    known: dict[str, Any],
    offset: int,
    judged: int,
    signum: int | None,
    where: str,
) -> int:
    """The end of a night (its records from `offset` on): the summary, earlier nights' index of
    findings updated with the new defects, the report; the exit status."""
    from gradcert.conformance.outcomes import load

    night = load(itertools.islice(read_records([results]), offset, None))
    found = runs.print_summary(night, known)
    new = [d for d in found if d.new and d.signature not in index]
    for d in new:
        if d.example is not None and d.example.get("case_file"):
            index[d.signature] = str(d.example["case_file"])
    changed = bool(new)
    for r in night.defects:  # the signatures a shrink settled into an indexed one are its too
        for sig in r.get("of", ()):
            if r["defect"] in index and sig not in index:
                index[sig], changed = index[r["defect"]], True
    if changed:
        findings.mkdir(parents=True, exist_ok=True)
        (findings / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    workers = {r["worker"] for r in night.cases if r.get("worker")}
    by = f" from {len(workers)} worker process(es)" if workers else ""
    print(
        f"\nfuzz {args.backend}{' ' + where if where else ''}: {judged} cases{by}; {len(new)} new defect(s); "
        f"results: {results}; findings: {findings}"
    )
    if args.report:
        from gradcert.reports.html import write

        print(f"report: {write([results], args.report)}")
    if night.incomplete:
        print(f"INCOMPLETE ({(night.ending or {}).get('signal')}): run the same command again to resume")
        return runs.exit_for(signum)
    return runs.EXIT_FAIL if new else runs.EXIT_OK


def findings_index(findings: Path) -> dict[str, str]:
    """Earlier nights' defects: signature -> minimal case file."""
    p = findings / "index.json"
    return json.loads(p.read_text()) if p.exists() else {}
