"""The `gradcert` command: its arguments parsed into a `RunOptions` and handed to a run
(`gradcert.runs`); `show`, `known` and `report` read and write files of their own."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from gradcert.runs.options import RunOptions

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def cmd_show(args: argparse.Namespace) -> int:
    from gradcert.cli.show import show

    show(args)
    return EXIT_OK


def cmd_certify(args: argparse.Namespace) -> int:
    from gradcert.runs.certify import certify

    return certify(_options(args), _render)


def cmd_replay(args: argparse.Namespace) -> int:
    from gradcert.runs.replay import replay

    return replay(_options(args))


def cmd_check(args: argparse.Namespace) -> int:
    from gradcert.runs.check import run

    return run(_options(args))


def cmd_fuzz(args: argparse.Namespace) -> int:
    from gradcert.runs.fuzz import fuzz

    return fuzz(_options(args), _render)


def _options(args: argparse.Namespace) -> RunOptions:
    """The parsed arguments as a run takes them (`RunOptions`: the fields the command has)."""
    from dataclasses import fields

    from gradcert.runs.options import RunOptions

    return RunOptions(**{f.name: getattr(args, f.name) for f in fields(RunOptions) if hasattr(args, f.name)})


def _render(paths: list[str | Path], out: str | Path, baseline: str | Path | None = None) -> Path:
    """The report writer a run is handed (imported once a run has results to render)."""
    from gradcert.reports.html import write

    return write(paths, out, baseline)


def _usage_errors() -> tuple[type[Exception], ...]:
    """The errors that are the user's input (exit 2, one line), imported only once one is raised:
    a command imports only what it needs (certify's own process no NumPy or IR: it starts pytest's
    workers sooner)."""
    from gradcert.backends.registry import UnknownBackend
    from gradcert.conformance.defects import KnownDefectsError
    from gradcert.conformance.results import ResultsFileError
    from gradcert.reference.autodiff.backward import BackwardError
    from gradcert.reference.interpreter import InterpreterError
    from gradcert.reference.ir.loader import ProgramFileError
    from gradcert.runs.options import RunError

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


class UsageError(Exception):
    pass


def cmd_known(args: argparse.Namespace) -> int:
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
    cert.add_argument(
        "--shrink-seconds",
        type=float,
        default=30.0,
        help="seconds a new defect's shrink may take",
    )
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
        "files",
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
    fz.add_argument(
        "--shrink-seconds",
        type=float,
        default=30.0,
        help="seconds a new defect's shrink may take (also all of a process's)",
    )
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
