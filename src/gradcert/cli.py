"""The `gradcert` command."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def cmd_show(args: argparse.Namespace) -> int:
    from .show import show

    show(args)
    return EXIT_OK


def cmd_certify(args: argparse.Namespace) -> int:
    import pytest

    from .conformance.areas import AREAS, PYTEST_ENV, command_line
    from .conformance.backends import backend_name

    name = backend_name(args.backend)  # fails fast, without importing a built-in backend
    areas = [a.strip() for a in args.areas.split(",")] if args.areas else list(AREAS)
    unknown = [a for a in areas if a not in AREAS]
    if unknown:
        raise UsageError(f"unknown area(s) {', '.join(unknown)} (known: {', '.join(AREAS)})")
    stem = f"reports/{name}-{args.profile}"
    results = args.results or f"{stem}.jsonl"
    pytest_args = command_line(
        areas, args.backend, args.profile, results, args.findings, args.isolate, args.timeout, args.workers
    )
    pytest_args += ["--gradcert-seed", str(args.seed)]
    if args.db:
        pytest_args += ["--gradcert-db", args.db]
    if args.no_shrink:
        pytest_args += ["--gradcert-no-shrink"]
    if args.exhaustive:
        pytest_args += ["--gradcert-exhaustive"]
    os.environ.update(PYTEST_ENV)  # (read by pytest here and by its xdist workers)
    code = int(pytest.main(pytest_args))
    report = args.report or f"{stem}.html"
    from .reports.html import write

    path = write([results], report)
    print(f"results: {results}\nreport: {path}")
    return {0: EXIT_OK, 1: EXIT_FAIL}.get(code, EXIT_USAGE)


# `TEST[DRAW]`: how the reports name a case the seeded search drew (its record holds the draw)
_DRAWN = re.compile(r"(test_\w+\.py::\w+)\[(seed:[0-9a-f]+|simplest)\]")


def cmd_replay(args: argparse.Namespace) -> int:
    from .conformance.api import FAILING
    from .conformance.areas import AREAS
    from .conformance.session import Session
    from .generators.case import load_case

    drawn = _DRAWN.fullmatch(args.case)
    if drawn and not os.path.exists(args.case):  # a pass on record by its draw, as reports name it
        from .conformance.backends import resolve
        from .conformance.search import redraw

        case = redraw(drawn[1], drawn[2], resolve(args.backend).capabilities)
    else:
        case = load_case(args.case)
    area = AREAS.get(case.area or "", AREAS["elementwise"])
    s = Session(
        args.backend,
        None,
        args.findings,
        isolate={"auto": None, "yes": True, "no": False}[args.isolate],
        timeout=args.timeout,
    )
    try:
        v = s.judge(area, case)
    finally:
        s.close()
    print(case.to_text().split("---")[0], end="")
    print(f"verdict: {v.status}" + (f" ({v.oracle})" if v.oracle else "") + (f": {v.message}" if v.message else ""))
    return EXIT_FAIL if v.status in FAILING else EXIT_OK


class UsageError(Exception):
    pass


def _usage_errors() -> tuple[type[Exception], ...]:
    """The errors that are the user's input (exit 2, one line), imported only once one is raised:
    a command imports only what it needs (certify's own process no NumPy or IR: it starts pytest's
    workers sooner)."""
    from .conformance.backends import UnknownBackend
    from .conformance.results import ResultsFileError
    from .reference.backward import BackwardError
    from .reference.interpreter import InterpreterError
    from .reference.loader import ProgramFileError

    return (ProgramFileError, InterpreterError, BackwardError, ValueError, UnknownBackend, UsageError, ResultsFileError)


def cmd_fuzz(args: argparse.Namespace) -> int:
    from .conformance import fuzz
    from .conformance.areas import AREAS
    from .conformance.backends import backend_name

    args.backend_name = backend_name(args.backend)
    unknown = [a for a in args.areas.split(",") if a and a.strip() not in AREAS]
    if unknown:
        raise UsageError(f"unknown area(s) {', '.join(unknown)}")
    if args.minutes <= 0:
        raise UsageError("--minutes must be positive")
    return fuzz.run(args)


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .reports.html import write

    missing = [p for p in args.results if not Path(p).exists()]
    if missing:
        raise UsageError(f"{missing[0]}: no such results file")
    print(f"report: {write(args.results, args.output)}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gradcert", description="Certify reverse-mode differentiation.")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="parse, verify, print and run program files")
    show.add_argument("files", nargs="+", metavar="FILE")
    show.add_argument("--grad", action="store_true", help="also build and run the reference backward")
    show.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    show.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    show.set_defaults(func=cmd_show)

    cert = sub.add_parser("certify", help="run the certification areas against a backend")
    cert.add_argument("--backend", default="reference", help="built-in name, entry point or module:attribute")
    cert.add_argument("--profile", default="certify", choices=("quick", "certify", "nightly"))
    cert.add_argument("--areas", default="", help="comma-separated areas (default: all)")
    cert.add_argument("--workers", default="1", help="worker processes (pytest-xdist): a number or auto")
    cert.add_argument("--results", default="", help="JSON-lines results file (default reports/BACKEND-PROFILE.jsonl)")
    cert.add_argument("--report", default="", help="HTML report (default reports/BACKEND-PROFILE.html)")
    cert.add_argument("--findings", default="reports/findings", help="folder for failing cases")
    cert.add_argument("--isolate", default="auto", choices=("auto", "yes", "no"))
    cert.add_argument("--timeout", type=float, default=60.0, help="seconds per case in a worker process")
    cert.add_argument("--seed", type=int, default=0)
    cert.add_argument("--db", default="", help="hypothesis example database folder")
    cert.add_argument("--no-shrink", action="store_true", help="report failures as found, unshrunk (faster)")
    cert.add_argument("--exhaustive", action="store_true", help="full-Jacobian finite differences for small programs")
    cert.set_defaults(func=cmd_certify)

    rep = sub.add_parser("replay", help="judge one saved case again")
    rep.add_argument(
        "case",
        metavar="CASE",
        help="a case file, or TEST[DRAW] as a report names a drawn case (drawn again for --backend)",
    )
    rep.add_argument("--backend", default="reference")
    rep.add_argument("--findings", default="reports/findings")
    rep.add_argument("--isolate", default="auto", choices=("auto", "yes", "no"))
    rep.add_argument("--timeout", type=float, default=60.0)
    rep.set_defaults(func=cmd_replay)

    fz = sub.add_parser("fuzz", help="fuzz a backend for a time budget (nightly profile, example database)")
    fz.add_argument("--backend", default="reference")
    fz.add_argument("--minutes", type=float, default=10.0)
    fz.add_argument("--workers", default="1", help="worker processes: a number or auto")
    fz.add_argument("--db", default="reports/fuzz-db", help="hypothesis example database folder")
    fz.add_argument("--results", default="", help="results file (default reports/BACKEND-fuzz.jsonl)")
    fz.add_argument("--findings", default="reports/findings", help="folder of saved failing cases")
    fz.add_argument("--areas", default="", help="comma-separated areas (default: all)")
    fz.add_argument("--report", default="", help="also render an HTML report here")
    fz.add_argument("--isolate", default="auto", choices=("auto", "yes", "no"))
    fz.add_argument("--timeout", type=float, default=60.0)
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
