"""The pytest plugin (entry point `pytest11: gradcert`): options, profiles (cases per test), the
session and search fixtures, capability skips and per-backend known failures."""

from __future__ import annotations

import gc
import os
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

BACKEND = "--gradcert-backend"
PROFILE = "--gradcert-profile"
RESULTS = "--gradcert-results"
FINDINGS = "--gradcert-findings"
ISOLATE = "--gradcert-isolate"
TIMEOUT = "--gradcert-timeout"
SEED = "--gradcert-seed"
DB = "--gradcert-db"
NO_SHRINK = "--gradcert-no-shrink"
EXHAUSTIVE = "--gradcert-exhaustive"
BUDGET = "--gradcert-budget"
KNOWN = Path(__file__).parent / "known_failures"

# cases drawn per test, and whether every run draws the same ones
# A known failure (xfail) is confirmed by its first failing case, its minimal case being on file
# in known_failures/: shrinking it again took most of a Paddle certify run. Fuzzing shrinks it (a
# new defect in a known-failing test shows as a new signature only once shrunk).
PROFILES: dict[str, dict[str, Any]] = {
    "quick": {"examples": 12, "derandomize": True, "shrink_known": False},
    "certify": {"examples": 250, "derandomize": True, "shrink_known": False},
    "nightly": {"examples": 100_000, "derandomize": False},
}


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gradcert", "gradcert conformance")
    g.addoption(BACKEND, default="reference", help="backend: a built-in name, an entry point or module:attribute")
    g.addoption(PROFILE, default="quick", choices=sorted(PROFILES), help="how many cases each test draws")
    g.addoption(RESULTS, default="reports/results.jsonl", help="JSON-lines results file (appended; resumed)")
    g.addoption(FINDINGS, default="reports/findings", help="where failing cases are saved")
    g.addoption(ISOLATE, default="auto", choices=["auto", "yes", "no"], help="run the backend in worker processes")
    g.addoption(TIMEOUT, type=float, default=60.0, help="seconds per case in a worker process")
    g.addoption(SEED, type=int, default=0, help="seed of the oracles' random directions and cotangents")
    g.addoption(DB, default=None, help="hypothesis example database folder (replayed first; nightly)")
    g.addoption(NO_SHRINK, action="store_true", help="report failures as found, without shrinking them")
    g.addoption(EXHAUSTIVE, action="store_true", help="full finite-difference Jacobian for small programs")
    g.addoption(BUDGET, type=float, default=None, help="seconds each test may draw cases for (fuzzing)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gradcert_area(name): a gradcert certification area")


@pytest.fixture(scope="session")
def gradcert_session(request: pytest.FixtureRequest) -> Any:
    from .session import Session

    c = request.config
    iso = c.getoption(ISOLATE)
    results = c.getoption(RESULTS)
    s = Session(
        c.getoption(BACKEND),
        results,
        c.getoption(FINDINGS),
        c.getoption(PROFILE),
        None if iso == "auto" else iso == "yes",
        c.getoption(TIMEOUT),
        c.getoption(SEED),
        exhaustive=c.getoption(EXHAUSTIVE),
        budget=c.getoption(BUDGET),
    )
    # What is loaded by now (pytest, hypothesis, the backend's framework) lives for the whole run:
    # keep it out of the cyclic collector's scans, which every case's programs trigger
    # (bench/overhead.py: 0.12 ms a check).
    gc.freeze()
    yield s
    s.close()


@pytest.fixture(scope="session")
def gradcert_search(request: pytest.FixtureRequest) -> Any:
    from .search import Search

    c = request.config
    profile = c.getoption(PROFILE)
    db = c.getoption(DB) if profile == "nightly" else None
    return Search(**PROFILES[profile], shrink=not c.getoption(NO_SHRINK), db=db)


def known_folder() -> Path:
    return Path(os.environ.get("GRADCERT_KNOWN_FAILURES", KNOWN))


def known_cases(backend: str) -> list[Path]:
    """The minimal cases of the backend's known failures, `known_failures/<backend>/*.case` (named
    `<area>-<oracle, or "backend" for a crash, hang or error>-<id>.case`, as findings are saved)."""
    return sorted((known_folder() / backend).glob("*.case"))


def known_failures(backend: str) -> list[tuple[str, str]]:
    """(test-id prefix, reason) lines of `known_failures/<backend>.txt`."""
    path = known_folder() / f"{backend}.txt"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            prefix, _, reason = line.partition(" ")
            out.append((prefix, reason.strip() or "known failure"))
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(getattr(getattr(i, "obj", None), "_gradcert_area", None) for i in items):
        return
    from .backends import UnknownBackend, resolve

    spec = config.getoption(BACKEND)
    try:
        backend = resolve(spec)
    except UnknownBackend as e:
        raise pytest.UsageError(str(e)) from None
    from . import areas

    areas.CAPABILITIES = frozenset(backend.capabilities)
    known = known_failures(backend.name)
    matched: set[str] = set()
    controller = not hasattr(config, "workerinput")
    # under xdist the controller collects nothing: the first worker records for all
    recorder = controller or getattr(config, "workerinput", {}).get("workerid") == "gw0"
    for item in items:
        area = getattr(getattr(item, "obj", None), "_gradcert_area", None)
        if area is None:
            continue
        item.add_marker(pytest.mark.gradcert_area(area.name))
        _report_cases(item)
        from .areas import test_id

        rel = test_id(item)
        missing = area.needs - backend.capabilities
        if missing:
            why = f"{backend.name} lacks {', '.join(sorted(missing))}"
            item.add_marker(pytest.mark.skip(reason=f"unsupported: {why}"))
            if recorder:  # on record, so that reports show the area as unsupported, not absent
                _record_unsupported(config, backend, area.name, rel, why)
        for prefix, reason in known:
            if rel.startswith(prefix):
                matched.add(prefix)
                item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
    if all(getattr(getattr(i, "obj", None), "_gradcert_area", None) for i in items):
        # the heaviest tests first, so that xdist's workers, taking tests as they free up, finish
        # together: a linearity check asks for three gradients, then second order, deeper nesting,
        # more features; then the light ones that fill the workers' last gaps: bad requests (one
        # backend call, refused at once), and known failures (under quick and certify they stop at
        # their first failing case, mostly the first case drawn)
        items.sort(key=_weight, reverse=True)  # (stable, and the same in every worker)
    if controller:  # warn once
        for prefix, _ in known:
            if prefix not in matched:
                warnings.warn(f"known-failures entry {prefix!r} for {backend.name} matches no test", stacklevel=1)


def _weight(item: pytest.Item) -> tuple[bool, bool, bool, int, int, int]:
    f, area = item.obj._gradcert_features, item.obj._gradcert_area  # type: ignore[attr-defined]
    known = item.get_closest_marker("xfail") is not None
    light = area.check == "bad_request"
    return (not known, not light, area.check == "linearity", area.order, f.max_depth, len(f.enabled))


def _report_cases(item: pytest.Item) -> None:
    """A failing case is reported as gradcert reports it (the verdict, the case, its replay
    command) with hypothesis's notes, not as a traceback through gradcert, hypothesis and pytest.
    Hypothesis also makes this report for every failing example it meets while shrinking: pytest's
    traceback took 23 ms each, a third of a Paddle certify run (bench/overhead.py)."""
    from .session import CaseFailed

    plain = item.repr_failure

    def repr_failure(excinfo: pytest.ExceptionInfo[BaseException], *args: Any, **kw: Any) -> Any:
        e = excinfo.value
        if isinstance(e, CaseFailed):
            return "\n".join([str(e), *getattr(e, "__notes__", [])])
        return plain(excinfo, *args, **kw)

    item.repr_failure = repr_failure  # type: ignore[method-assign]


def _record_unsupported(config: pytest.Config, backend: Any, area: str, test: str, why: str) -> None:
    """One `unsupported` verdict for a whole test whose area needs a capability the backend lacks."""
    path = config.getoption(RESULTS)
    if not path:
        return
    from .results import ResultsFile

    ResultsFile(path).append(
        {
            "test_id": test,
            "case_id": "",
            "area": area,
            "backend": backend.name,
            "backend_version": backend.version,
            "profile": config.getoption(PROFILE),
            "seed": config.getoption(SEED),
            "time": time.time(),
            "status": "unsupported",
            "oracle": "capabilities",
            "message": why,
        }
    )
