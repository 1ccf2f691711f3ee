"""The `gradcert` command."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def cmd_show(args: argparse.Namespace) -> int:
    from gradcert.cli.show import show

    show(args)
    return EXIT_OK


def cmd_certify(args: argparse.Namespace) -> int:
    """Run the certification tests in a child pytest (`runs.py`) and say what was tested and what
    is wrong: exit 0 when every case passed or showed a known defect, 1 for a new defect (with
    `--baseline`: for a case that passed in the baseline and fails now) or when nothing was judged,
    2 for bad usage, 130 / 143 when interrupted (SIGINT / SIGTERM: the report says INCOMPLETE)."""
    from pathlib import Path

    from gradcert.backends.registry import backend_name, resolve
    from gradcert.conformance import runs
    from gradcert.conformance.areas import PYTEST_ENV, command_line
    from gradcert.conformance.defects import known_defects
    from gradcert.conformance.outcomes import compare, load
    from gradcert.conformance.plugin import PROFILES
    from gradcert.conformance.results import read_records
    from gradcert.conformance.verdicts import Status
    from gradcert.reports.html import write

    name = backend_name(args.backend)  # fails fast, without importing a built-in backend
    areas = _areas(args.areas)
    _device_ready(args)
    stem = f"reports/{name}-{args.profile}"
    results = Path(args.results or f"{stem}.jsonl")
    report = Path(args.report or f"{stem}.html")
    findings = Path(args.findings or results.parent / "findings")
    if args.baseline and not Path(args.baseline).is_file():
        raise UsageError(f"{args.baseline}: no such baseline results file")
    done_before = runs.check_outputs(results, report, findings)
    baseline = load(read_records([args.baseline])) if args.baseline else None  # (a bad file: now, in one line)
    known = {name: known_defects(name)}
    capabilities = resolve(args.backend).capabilities
    planned = None
    if PROFILES[args.profile]["derandomize"]:
        from gradcert.conformance.areas import tests

        per: int = PROFILES[args.profile]["examples"]
        specs = [getattr(t, "_gradcert_area") for t in tests().values()]  # noqa: B009
        planned = per * sum(1 for a in specs if a.name in areas and a.needs <= capabilities)
    pytest_args = command_line(
        areas,
        args.backend,
        args.profile,
        str(results),
        str(findings),
        args.isolate,
        args.timeout,
        args.workers,
        args.device,
    )
    pytest_args += ["--gradcert-seed", str(args.seed), "--gradcert-shrink-seconds", str(args.shrink_seconds)]
    if args.db:
        pytest_args += ["--gradcert-db", args.db]
    if args.no_shrink:
        pytest_args += ["--gradcert-no-shrink"]
    if args.exhaustive:
        pytest_args += ["--gradcert-exhaustive"]
    env = dict(os.environ, **PYTEST_ENV)
    with runs.exclusive(results):
        progress = runs.Progress(runs.Follow(results), planned)
        progress.done_before = done_before
        runs.record_run(results, {"run": "start", "backend": name, "profile": args.profile, "planned": planned})
        with open(results.with_suffix(".log"), "w") as log:
            cmd = [sys.executable, "-m", "pytest", *pytest_args]
            code, signum = runs.run_child(cmd, env, log, progress, args.verbose)
        loaded = load(read_records([results]))
        judged = sum(1 for r in loaded.cases if r["case_id"])
        complete = signum is None and code in (0, 1) and (planned is None or judged >= planned)
        why = runs.signal_name(signum) if signum else (None if complete else f"pytest exited with status {code}")
        end = {"run": "end", "complete": complete, "planned": planned, "judged": judged, "signal": why, "exit": code}
        loaded.runs.append(runs.record_run(results, end))
    if complete:
        runs.confirm_unmet(args.backend, loaded, known, results, _isolate(args), args.timeout)
    found = runs.print_summary(loaded, known)
    path = write([results], report, args.baseline or None)
    print(f"\nresults: {results}\nreport: {path}\nlog: {results.with_suffix('.log')}")
    if code not in (0, 1) and signum is None:
        log_path = results.with_suffix(".log")
        print(f"gradcert: error: the certification did not run ({why}); see {log_path}", file=sys.stderr)
        return EXIT_USAGE
    if not complete:
        of = f" of {planned}" if planned else ""
        print(f"INCOMPLETE ({why}): {judged}{of} cases judged; run the same command again to resume")
        return runs.exit_for(signum)
    if not any(r["status"] != Status.UNSUPPORTED for r in loaded.cases):
        print(f"FAILED: nothing certified: {name} declares none of the capabilities these areas need")
        return EXIT_FAIL
    if baseline is not None:
        c = compare(baseline, loaded)
        print(f"\nagainst {args.baseline}: {len(c.regressions)} regression(s)")
        for what, sigs in (("new", c.new), ("fixed", c.fixed), ("still failing", c.still)):
            for sig in sigs:
                print(f"  {what}: {sig}")
        for r in c.regressions[:20]:
            print(f"  regressed: {r['test_id']}[{r['case_id']}] {r['status']} {r.get('signature', '')}")
        return EXIT_FAIL if c.regressions else EXIT_OK
    new = [d for d in found if d.new]
    print(f"FAILED: {len(new)} new defect(s)" if new else "PASSED: every case passed or showed a known defect")
    return EXIT_FAIL if new or code == 1 else EXIT_OK


def _areas(spec: str) -> list[str]:
    from gradcert.conformance.areas import AREAS

    areas = [a.strip() for a in spec.split(",") if a.strip()] if spec else list(AREAS)
    unknown = [a for a in areas if a not in AREAS]
    if unknown:
        raise UsageError(f"unknown area(s) {', '.join(unknown)} (known: {', '.join(AREAS)})")
    return areas


# `TEST[DRAW]`: how the reports name a case the seeded search drew (its record holds the draw)
_DRAWN = re.compile(r"(test_\w+\.py::\w+)\[(seed:[0-9a-f]+|simplest)\]")


def cmd_replay(args: argparse.Namespace) -> int:
    """Judge saved cases (or drawn ones, by their names in a report) again: exit 1 if any fails,
    a known defect included (the case still fails)."""
    from gradcert.conformance.areas import AREAS
    from gradcert.conformance.check import area_of
    from gradcert.conformance.verdicts import DEFECTIVE, Status
    from gradcert.generators.case import Case, load_case

    cases: list[tuple[str, Case]] = []
    for name in args.cases:
        drawn = _DRAWN.fullmatch(name)
        if drawn and not os.path.exists(name):  # a case on record by its draw, as reports name it
            from gradcert.backends.registry import resolve
            from gradcert.conformance.judging import redraw

            cases.append((name, redraw(drawn[1], drawn[2], resolve(args.backend).capabilities)))
        else:
            cases.append((name, load_case(name)))
    s = _session(args)
    failed = False
    try:
        for name, case in cases:
            area = AREAS[case.area] if case.area in AREAS else area_of(case)  # (`check`'s own cases)
            v = s.judge(area, case)
            if len(cases) > 1:
                print(f"== {name}")
            print(case.to_text().split("---")[0], end="")
            said = f"verdict: {v.status}" + (f" ({v.oracle})" if v.oracle else "")
            print(said + (f": {v.message}" if v.message else ""))
            if v.kind:
                print(f"signature: {v.signature}")
            if v.status == Status.KNOWN:
                k = s.known[v.signature]
                print(f"known defect: {k.reason} ({k.case})")
            failed = failed or v.status in DEFECTIVE
    finally:
        s.close()
    return EXIT_FAIL if failed else EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    """Judge programs of one's own (or saved cases) against a backend: exit 1 if one fails."""
    from pathlib import Path

    import numpy as np

    from gradcert.conformance.areas import AREAS
    from gradcert.conformance.check import Request, area_of, cases_of
    from gradcert.conformance.verdicts import DEFECTIVE

    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat}: at least 1")
    inputs = None
    if args.inputs:
        if not Path(args.inputs).is_file():
            raise UsageError(f"{args.inputs}: no such .npz file")
        with np.load(args.inputs) as z:
            inputs = {k: z[k] for k in z.files}
    request = Request(
        _ints(args.wrt), _ints(args.outputs), args.cotangents, _ints(args.no_grad) or (), args.order, inputs
    )
    seeds = range(args.seed, args.seed + args.repeat)
    todo = [(path, case) for path in args.files for case in cases_of(path, request, seeds)]  # (bad input: now)
    s = _session(args)
    failed = 0
    try:
        for path, case in todo:
            area = AREAS[case.area] if case.area in AREAS else area_of(case)
            v = s.judge(area, case)
            seed = "" if case.seed is None or args.repeat == 1 else f" (seed {case.seed})"
            print(f"{path}{seed}: {v.status}" + (f" ({v.oracle}): {v.message}" if v.kind else ""))
            if v.status in DEFECTIVE:
                failed += 1
                saved = s.save(case, v)
                print(f"  signature: {v.signature}")
                print(f"  case: {saved}\n  replay: {s.replay_command(saved)}")
    finally:
        s.close()
    print(f"{len(todo) - failed} of {len(todo)} passed" + (f", {failed} failed" if failed else ""))
    return EXIT_FAIL if failed else EXIT_OK


def _session(args: argparse.Namespace) -> Any:
    """The session that judges cases one by one for `replay` and `check` (recorded nowhere)."""
    from gradcert.conformance.session import Session

    return Session(args.backend, None, args.findings, isolate=_isolate(args), timeout=args.timeout, device=args.device)


def _device_ready(args: argparse.Namespace) -> None:
    """`--device gpu`: CuPy with a CUDA device (the reference and finite differences run on it),
    and the backend able to run there; else one line, exit 2, before anything runs. (The CPU needs
    no check: certify's own process then imports no framework.)"""
    if args.device == "cpu":
        return
    from gradcert.backends.registry import resolve
    from gradcert.reference.interpreter import namespace

    namespace(args.device)
    resolve(args.backend, args.device)


def _isolate(args: argparse.Namespace) -> bool | None:
    """`--isolate auto|yes|no`: None lets the session decide (a worker process for any backend but
    the reference)."""
    return {"auto": None, "yes": True, "no": False}[args.isolate]


def _ints(text: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"{text!r} is not a comma-separated list of positions (0, 1, ...)") from None


class UsageError(Exception):
    pass


def _usage_errors() -> tuple[type[Exception], ...]:
    """The errors that are the user's input (exit 2, one line), imported only once one is raised:
    a command imports only what it needs (certify's own process no NumPy or IR: it starts pytest's
    workers sooner)."""
    from gradcert.backends.registry import UnknownBackend
    from gradcert.conformance.defects import KnownDefectsError
    from gradcert.conformance.results import ResultsFileError
    from gradcert.conformance.runs import RunError
    from gradcert.reference.autodiff.backward import BackwardError
    from gradcert.reference.interpreter import InterpreterError
    from gradcert.reference.ir.loader import ProgramFileError

    return (
        ProgramFileError,
        InterpreterError,
        BackwardError,
        ValueError,
        UnknownBackend,
        UsageError,
        ResultsFileError,
        KnownDefectsError,
        RunError,
    )


def cmd_fuzz(args: argparse.Namespace) -> int:
    from gradcert.backends.registry import backend_name
    from gradcert.conformance import fuzz

    args.backend_name = backend_name(args.backend)
    _areas(args.areas)
    _device_ready(args)
    if args.minutes <= 0:
        raise UsageError("--minutes must be positive")
    if args.address and args.engine != "ray":
        raise UsageError("--address needs --engine ray")
    return fuzz.run(args)


def cmd_known(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gradcert.conformance.defects import entries
    from gradcert.conformance.results import read_records

    if not Path(args.results).is_file():
        raise UsageError(f"{args.results}: no such results file")
    folder = Path(args.folder)
    text = entries(read_records([args.results]), folder, args.backend)
    if not text:
        print(f"no new defects of {args.backend} in {args.results}")
        return EXIT_OK
    toml = folder / f"{args.backend}.toml"
    with open(toml, "a") as f:
        f.write(("\n" if toml.exists() and toml.stat().st_size else "") + text)
    print(f"{text.count('[[defect]]')} defect(s) appended to {toml}; write each one's reason there")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gradcert.conformance.results import read_records
    from gradcert.reports.html import write

    missing = [p for p in args.results if not Path(p).exists()]
    if missing:
        raise UsageError(f"{missing[0]}: no such results file")
    for p in args.results:  # (a file with a line but no record is not a results file, not an empty run)
        if Path(p).read_bytes().strip() and next(iter(read_records([p])), None) is None:
            raise UsageError(f"{p}:1: not a JSON record: not a results file")
    print(f"report: {write(args.results, args.output)}")
    return EXIT_OK


def _workers(text: str) -> str:
    """`--workers`: a positive number or `auto` (argparse says what is wrong in one line, exit 2)."""
    if text == "auto" or (text.isdigit() and int(text) >= 1):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers (a number >= 1, or auto)")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line (`--help` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _importable_here() -> None:
    """A backend named `module:attribute` is found in the current folder, as `python -m` finds
    modules there, by this process and by every process it starts (pytest, its workers, the
    backend's worker processes)."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if here not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([here, *filter(None, paths)])


def main(argv: Sequence[str] | None = None) -> int:
    _importable_here()
    parser = _Parser(prog="gradcert", description="Certify reverse-mode differentiation.")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="parse, verify, print and run program files")
    show.add_argument("files", nargs="+", metavar="FILE")
    show.add_argument("--grad", action="store_true", help="also build and run the reference backward")
    show.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    show.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    show.set_defaults(func=cmd_show)

    # what every command that judges cases against a backend takes
    judged = _Parser(add_help=False)
    judged.add_argument("--backend", default="reference", help="built-in name, entry point or module:attribute")
    judged.add_argument("--isolate", default="auto", choices=("auto", "yes", "no"), help="cases in a worker process")
    judged.add_argument("--timeout", type=float, default=60.0, help="seconds per case in a worker process")
    judged.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "gpu"),
        help="where the backend and the oracles run: cpu, or gpu (CuPy and the framework's CUDA device)",
    )

    cert = sub.add_parser("certify", parents=[judged], help="run the certification areas against a backend")
    cert.add_argument("--profile", default="certify", choices=("quick", "certify", "nightly"))
    cert.add_argument("--areas", default="", help="comma-separated areas (default: all)")
    cert.add_argument("--workers", default="1", type=_workers, help="worker processes (pytest-xdist): N >= 1 or auto")
    cert.add_argument("--results", default="", help="JSON-lines results file (default reports/BACKEND-PROFILE.jsonl)")
    cert.add_argument("--report", default="", help="HTML report (default reports/BACKEND-PROFILE.html)")
    cert.add_argument("--findings", default="", help="folder for defects' cases (default: beside the results)")
    cert.add_argument("--seed", type=int, default=0)
    cert.add_argument("--db", default="", help="hypothesis example database folder")
    cert.add_argument("--no-shrink", action="store_true", help="report failures as found, unshrunk (faster)")
    cert.add_argument("--exhaustive", action="store_true", help="full-Jacobian finite differences for small programs")
    cert.add_argument("--baseline", default="", help="earlier results of the same draws: fail on regressions")
    cert.add_argument("--shrink-seconds", type=float, default=30.0, help="time a new defect's shrink may take")
    cert.add_argument("-v", "--verbose", action="store_true", help="show pytest's own output (and hypothesis's notes)")
    cert.set_defaults(func=cmd_certify)

    ck = sub.add_parser(
        "check", parents=[judged], help="judge programs of one's own (.gc) or saved cases against a backend"
    )
    ck.add_argument("files", nargs="+", metavar="FILE", help="program (.gc) or case (.case) files")
    ck.add_argument("--wrt", default="", help="input positions to differentiate (default: float, not stop_gradient)")
    ck.add_argument("--outputs", default="", help="output positions to differentiate (default: every float one)")
    ck.add_argument("--cotangents", default="ones", choices=("ones", "random"))
    ck.add_argument("--no-grad", default="", help="input positions in the no-grad set")
    ck.add_argument("--order", type=int, default=1, choices=(1, 2))
    ck.add_argument("--seed", type=int, default=0, help="seed of the inputs (in each op's safe domain)")
    ck.add_argument("--inputs", default="", help="an .npz file of the inputs, by name")
    ck.add_argument("--repeat", type=int, default=1, help="judge each program on this many seeds")
    ck.add_argument("--findings", default="reports/findings", help="where failing cases are saved")
    ck.set_defaults(func=cmd_check)

    kn = sub.add_parser("known", help="write a results file's new defects as known-defect entries")
    kn.add_argument("results", metavar="RESULTS")
    kn.add_argument("--backend", required=True, help="the backend whose defects to write")
    kn.add_argument("-o", "--folder", default="known", help="folder of <backend>.toml and its cases")
    kn.set_defaults(func=cmd_known)

    rep = sub.add_parser("replay", parents=[judged], help="judge one saved case again")
    rep.add_argument(
        "cases",
        nargs="+",
        metavar="CASE",
        help="case files, or TEST[DRAW] as a report names a drawn case (drawn again for --backend)",
    )
    rep.add_argument("--findings", default="reports/findings")
    rep.set_defaults(func=cmd_replay)

    fz = sub.add_parser(
        "fuzz", parents=[judged], help="fuzz a backend for a time budget (nightly profile, example database)"
    )
    fz.add_argument("--minutes", type=float, default=10.0)
    fz.add_argument("--workers", default="1", type=_workers, help="worker processes: N >= 1 or auto")
    fz.add_argument(
        "--db", default="reports/fuzz-db", help="hypothesis example database: a folder or redis://HOST:PORT/N"
    )
    fz.add_argument("--engine", default="local", choices=("local", "ray"), help="local (pytest-xdist) or ray")
    fz.add_argument("--address", default="", help="--engine ray: the cluster (HOST:PORT or auto; default a local one)")
    fz.add_argument("--shrink-seconds", type=float, default=30.0, help="seconds each new defect's shrink may take")
    fz.add_argument("--results", default="", help="results file (default reports/BACKEND-fuzz.jsonl)")
    fz.add_argument("--findings", default="", help="folder of defects' cases (default: beside the results)")
    fz.add_argument("--areas", default="", help="comma-separated areas (default: all)")
    fz.add_argument("--report", default="", help="also render an HTML report here")
    fz.set_defaults(func=cmd_fuzz)

    report = sub.add_parser("report", help="render results files into one HTML report")
    report.add_argument("results", nargs="+", metavar="RESULTS")
    report.add_argument("-o", "--output", default="reports/report.html")
    report.set_defaults(func=cmd_report)

    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except _usage_errors() as e:
        print(f"gradcert: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
