"""What a run is asked to do (`RunOptions`, one for every kind of run: the `gradcert` command
parses its arguments into one), and the set-up every run shares: the areas, the device, the
isolation, the session that judges cases one by one.

This module imports nothing heavy: certify's own process imports no NumPy, no IR and no framework
(it starts pytest's workers sooner)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradcert.conformance.session import Session

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 2, 130, 143

# Renders results files into an HTML report (the JSON summary and JUnit XML beside it): (results
# files, the report's path, a baseline results file or None) -> the report's path. The reports
# floor sits above the runs, so a run is handed its renderer (`gradcert.reports.html.write`).
Render = Callable[[list[str | Path], str | Path, str | Path | None], Path]


class RunError(ValueError):
    """Bad usage found before anything runs (exit 2, one line)."""


@dataclass
class RunOptions:
    """Everything a run takes; each kind of run reads the fields it needs. The defaults are the
    command line's for `certify` (`fuzz`, `check` and `replay` state theirs)."""

    backend: str = "reference"  # built-in name, entry point or module:attribute
    isolate: str = "auto"  # auto, yes, no: cases in a worker process
    timeout: float = 60.0  # seconds per case in a worker process
    device: str = "cpu"  # cpu, gpu
    # certify and fuzz
    profile: str = "certify"  # quick, certify, nightly
    areas: str = ""  # comma-separated areas (all where empty)
    workers: str = "1"  # N >= 1 or auto
    results: str = ""  # the results file (default reports/BACKEND-PROFILE.jsonl, or -fuzz.jsonl)
    report: str = ""  # the HTML report
    findings: str = ""  # folder of defects' cases (default beside the results)
    seed: int = 0
    db: str = ""  # hypothesis example database: a folder, or redis://HOST:PORT/N
    no_shrink: bool = False
    exhaustive: bool = False
    baseline: str = ""  # earlier results of the same draws
    shrink_seconds: float = 30.0
    verbose: bool = False
    # fuzz
    minutes: float = 10.0
    engine: str = "local"  # local (pytest-xdist) or ray
    address: str = ""  # engine ray: the cluster
    # check and replay: program, case files, or drawn cases by name (replay)
    files: Sequence[str] = field(default_factory=list)
    wrt: str = ""  # comma-separated positions
    outputs: str = ""
    cotangents: str = "ones"
    no_grad: str = ""
    order: int = 1
    inputs: str = ""  # an .npz file of the inputs, by name
    repeat: int = 1

    @property
    def isolated(self) -> bool | None:
        """`isolate` as the session takes it: None lets the session decide (a worker process for
        any backend but the reference)."""
        return {"auto": None, "yes": True, "no": False}[self.isolate]


def areas(spec: str) -> list[str]:
    """The areas a comma-separated list names (every area where empty); unknown ones: RunError."""
    from gradcert.conformance.areas import AREAS

    names = [a.strip() for a in spec.split(",") if a.strip()] if spec else list(AREAS)
    unknown = [a for a in names if a not in AREAS]
    if unknown:
        raise RunError(f"unknown area(s) {', '.join(unknown)} (known: {', '.join(AREAS)})")
    return names


def device_ready(opts: RunOptions) -> None:
    """`--device gpu`: CuPy with a CUDA device (the reference and finite differences run on it),
    and the backend able to run there; else one line, exit 2, before anything runs. (The CPU needs
    no check: certify's own process then imports no framework.)"""
    if opts.device == "cpu":
        return
    from gradcert.backends.registry import resolve
    from gradcert.reference.interpreter import namespace

    namespace(opts.device)
    resolve(opts.backend, opts.device)


def session(opts: RunOptions) -> Session:
    """The session that judges cases one by one for `replay` and `check` (recorded nowhere)."""
    from gradcert.conformance.session import Session

    return Session(opts.backend, None, opts.findings, isolate=opts.isolated, timeout=opts.timeout, device=opts.device)
