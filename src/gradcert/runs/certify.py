"""`gradcert certify`: the certification areas run against a backend in a child pytest
(`lifecycle.py`), then what was tested and what is wrong said (`ending.py`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gradcert.runs import lifecycle
from gradcert.runs.options import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Render, RunError, RunOptions, areas, device_ready


def certify(opts: RunOptions, render: Render) -> int:
    """Certify `opts.backend`; `render` writes the report. Exit 0 when every case passed or showed
    a known defect, 1 for a new defect (with `opts.baseline`: for a case that passed in the
    baseline and fails now) or when nothing was judged, 2 for bad usage, 130 / 143 when
    interrupted (SIGINT / SIGTERM: the report says INCOMPLETE)."""
    from gradcert.backends.registry import backend_name, resolve
    from gradcert.conformance.areas import PYTEST_ENV, command_line
    from gradcert.conformance.defects import known_defects
    from gradcert.conformance.outcomes import compare, load
    from gradcert.conformance.plugin import PROFILES
    from gradcert.conformance.results import read_records
    from gradcert.conformance.verdicts import Status
    from gradcert.runs.ending import confirm_unmet, print_summary

    name = backend_name(opts.backend)  # fails fast, without importing a built-in backend
    chosen = areas(opts.areas)
    device_ready(opts)
    stem = f"reports/{name}-{opts.profile}"
    results = Path(opts.results or f"{stem}.jsonl")
    report = Path(opts.report or f"{stem}.html")
    findings = Path(opts.findings or results.parent / "findings")
    if opts.baseline and not Path(opts.baseline).is_file():
        raise RunError(f"{opts.baseline}: no such baseline results file")
    done_before = lifecycle.check_outputs(results, report, findings)
    baseline = load(read_records([opts.baseline])) if opts.baseline else None  # (a bad file: now, in one line)
    known = {name: known_defects(name)}
    capabilities = resolve(opts.backend).capabilities
    planned = None
    if PROFILES[opts.profile]["derandomize"]:
        from gradcert.conformance.areas import tests

        per: int = PROFILES[opts.profile]["examples"]
        specs = [getattr(t, "_gradcert_area") for t in tests().values()]  # noqa: B009
        planned = per * sum(1 for a in specs if a.name in chosen and a.needs <= capabilities)
    pytest_args = command_line(
        chosen,
        opts.backend,
        opts.profile,
        str(results),
        str(findings),
        opts.isolate,
        opts.timeout,
        opts.workers,
        opts.device,
    )
    pytest_args += ["--gradcert-seed", str(opts.seed), "--gradcert-shrink-seconds", str(opts.shrink_seconds)]
    if opts.db:
        pytest_args += ["--gradcert-db", opts.db]
    if opts.no_shrink:
        pytest_args += ["--gradcert-no-shrink"]
    if opts.exhaustive:
        pytest_args += ["--gradcert-exhaustive"]
    env = dict(os.environ, **PYTEST_ENV)
    with lifecycle.exclusive(results):
        progress = lifecycle.Progress(lifecycle.Follow(results), planned)
        progress.done_before = done_before
        lifecycle.record_run(results, {"run": "start", "backend": name, "profile": opts.profile, "planned": planned})
        with open(results.with_suffix(".log"), "w") as log:
            cmd = [sys.executable, "-m", "pytest", *pytest_args]
            code, signum, _ = lifecycle.run_child(cmd, env, log, progress, opts.verbose)
        loaded = load(read_records([results]))
        judged = sum(1 for r in loaded.cases if r["case_id"])
        complete = signum is None and code in (0, 1) and (planned is None or judged >= planned)
        why = lifecycle.signal_name(signum) if signum else (None if complete else f"pytest exited with status {code}")
        end = {"run": "end", "complete": complete, "planned": planned, "judged": judged, "signal": why, "exit": code}
        loaded.runs.append(lifecycle.record_run(results, end))
    if complete:
        confirm_unmet(opts.backend, loaded, known, results, opts.isolated, opts.timeout)
    found = print_summary(loaded, known)
    path = render([results], report, opts.baseline or None)
    print(f"\nresults: {results}\nreport: {path}\nlog: {results.with_suffix('.log')}")
    if code not in (0, 1) and signum is None:
        log_path = results.with_suffix(".log")
        print(f"gradcert: error: the certification did not run ({why}); see {log_path}", file=sys.stderr)
        return EXIT_USAGE
    if not complete:
        of = f" of {planned}" if planned else ""
        print(f"INCOMPLETE ({why}): {judged}{of} cases judged; run the same command again to resume")
        return lifecycle.exit_for(signum)
    if not any(r["status"] != Status.UNSUPPORTED for r in loaded.cases):
        print(f"FAILED: nothing certified: {name} declares none of the capabilities these areas need")
        return EXIT_FAIL
    if baseline is not None:
        c = compare(baseline, loaded)
        print(f"\nagainst {opts.baseline}: {len(c.regressions)} regression(s)")
        for what, sigs in (("new", c.new), ("fixed", c.fixed), ("still failing", c.still)):
            for sig in sigs:
                print(f"  {what}: {sig}")
        for r in c.regressions[:20]:
            print(f"  regressed: {r['test_id']}[{r['case_id']}] {r['status']} {r.get('signature', '')}")
        return EXIT_FAIL if c.regressions else EXIT_OK
    new = [d for d in found if d.new]
    print(f"FAILED: {len(new)} new defect(s)" if new else "PASSED: every case passed or showed a known defect")
    return EXIT_FAIL if new or code == 1 else EXIT_OK
