"""`gradcert fuzz`: the nightly profile within a time budget, with a live progress line.

The certification tests run in a child pytest (across `--workers`, `lifecycle.py`), each drawing new
cases for its share of the budget and judging every one; hypothesis's example database replays
every failure found before first. At the end the night's failures are grouped into distinct
defects (`defects.py`); a defect is NEW where it is neither one of the backend's known defects nor
in the findings folder's index of earlier nights (`index.json`: signature -> minimal case file).
Interrupted, everything written stays and the summary says INCOMPLETE; running again resumes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gradcert.conformance.areas import PYTEST_ENV, command_line
from gradcert.conformance.defects import known_defects
from gradcert.conformance.results import read_records
from gradcert.runs import lifecycle
from gradcert.runs.ending import findings_index, finish
from gradcert.runs.options import Render, RunError, RunOptions, areas, device_ready

TESTS_PER_AREA = 2


def fuzz(opts: RunOptions, render: Render) -> int:
    """`gradcert fuzz`: the usage checked, then a night on this machine or on a Ray cluster
    (`cluster.py`); `render` writes the report where `opts.report` asks for one."""
    from gradcert.backends.registry import backend_name

    name = backend_name(opts.backend)
    areas(opts.areas)
    device_ready(opts)
    if opts.minutes <= 0:
        raise RunError("--minutes must be positive")
    if opts.address and opts.engine != "ray":
        raise RunError("--address needs --engine ray")
    if opts.engine == "ray":
        from gradcert.runs import cluster

        return cluster.run(opts, render)
    return run(opts, render, name)


def run(opts: RunOptions, render: Render, name: str) -> int:
    """A night on this machine: the tests in a child pytest across `opts.workers`."""
    if opts.db.startswith(("redis://", "rediss://")):
        from gradcert.conformance.judging import database

        database(opts.db)  # (unreachable: now, in one line)
    chosen = areas(opts.areas)
    results = Path(opts.results or f"reports/{name}-fuzz.jsonl")
    findings = Path(opts.findings or results.parent / "findings")
    lifecycle.check_outputs(results, Path(opts.report or results.with_suffix(".html")), findings)
    known = {name: known_defects(name)}  # (a bad file: now, in one line)
    workers = 1 if opts.workers in ("", "1") else opts.workers
    n_workers = int(workers) if str(workers).isdigit() else 2
    total = opts.minutes * 60
    budget = max(1.0, total * n_workers / (TESTS_PER_AREA * len(chosen)))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *command_line(
            chosen,
            opts.backend,
            "nightly",
            str(results),
            str(findings),
            opts.isolate,
            opts.timeout,
            str(workers),
            opts.device,
        ),
        "--gradcert-db",
        opts.db,
        "--gradcert-budget",
        f"{budget:.1f}",
        "--gradcert-shrink-seconds",
        str(opts.shrink_seconds),
    ]
    index = findings_index(findings)
    with lifecycle.exclusive(results):
        offset = sum(1 for _ in read_records([results]))
        lifecycle.record_run(results, {"run": "start", "backend": name, "profile": "nightly", "planned": None})
        progress = lifecycle.Progress(lifecycle.Follow(results), None, budget=total)
        with open(results.with_suffix(".log"), "w") as log:
            code, signum = lifecycle.run_child(cmd, dict(os.environ, **PYTEST_ENV), log, progress)
        complete = signum is None and code in (0, 1)
        why = lifecycle.signal_name(signum) if signum else (None if complete else f"pytest exited with status {code}")
        end = {"run": "end", "complete": complete, "planned": None, "judged": progress.follow.n, "signal": why}
        lifecycle.record_run(results, {**end, "exit": code})
    return finish(opts, render, results, findings, index, known, offset, progress.follow.n, signum, "")
