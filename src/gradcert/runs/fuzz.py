"""`gradcert fuzz`: the nightly profile within a time budget, with a live progress line.

The certification tests run in a child pytest (across `--workers`, `lifecycle.py`), each drawing new
cases for its share of the budget and judging every one, all of it (shrinking and localization
included) within the wall-clock minutes; hypothesis's example database replays
every failure found before first. At the end the night's failures are grouped into distinct
defects (`defects.py`); a defect is NEW where it is neither one of the backend's known defects nor
in the findings folder's index of earlier nights (`index.json`: signature -> minimal case file).
Interrupted, everything written stays and the summary says INCOMPLETE; running again resumes.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from gradcert.conformance.areas import PYTEST_ENV, command_line
from gradcert.conformance.defects import known_defects
from gradcert.conformance.results import read_records
from gradcert.runs import lifecycle
from gradcert.runs.ending import findings_index, finish
from gradcert.runs.options import Render, RunError, RunOptions, areas, device_ready

TESTS_PER_AREA = 2
# of a night's minutes, at most this share is kept for shrinking (and at most `--shrink-seconds`)
SHRINK_SHARE = 0.25
# seconds past its minutes after which a night's child pytest is stopped where it has not ended
# (its own deadline is the minutes; this is its teardown's, and a last case's, allowance)
STOP = 10.0


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
    # wall clock from here: drawing, localization and shrinking all end by `deadline` (the child
    # stops its work there), the child itself by `deadline + STOP` (stopped, where it overran)
    t0, m0 = time.time(), time.monotonic()
    total = opts.minutes * 60
    reserve = 0.0 if opts.no_shrink else min(opts.shrink_seconds, SHRINK_SHARE * total)
    budget = max(1.0, (total - reserve) * n_workers / (TESTS_PER_AREA * len(chosen)))
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
        "--gradcert-deadline",
        f"{t0 + total:.3f}",
        "--gradcert-draw-until",
        f"{t0 + total - reserve:.3f}",
        *(["--gradcert-no-shrink"] if opts.no_shrink else []),
    ]
    index = findings_index(findings)
    with lifecycle.exclusive(results):
        offset = sum(1 for _ in read_records([results]))
        lifecycle.record_run(results, {"run": "start", "backend": name, "profile": "nightly", "planned": None})
        progress = lifecycle.Progress(lifecycle.Follow(results), None, budget=total)
        with open(results.with_suffix(".log"), "w") as log:
            env = dict(os.environ, **PYTEST_ENV)
            code, signum, cut = lifecycle.run_child(cmd, env, log, progress, until=m0 + total + STOP)
        complete = signum is None and (code in (0, 1) or cut)
        why = lifecycle.signal_name(signum) if signum else (None if complete else f"pytest exited with status {code}")
        end = {"run": "end", "complete": complete, "planned": None, "judged": progress.follow.n, "signal": why}
        if cut:  # (what it had not shrunk stands as found)
            end["cut"] = f"stopped {STOP:g} s past its {opts.minutes:g} minute(s)"
        lifecycle.record_run(results, {**end, "exit": code})
    return finish(opts, render, results, findings, index, known, offset, progress.follow.n, signum, "")
