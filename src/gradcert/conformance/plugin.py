"""The pytest plugin (entry point `pytest11: gradcert`): options, profiles (cases per test), the
session and search fixtures, and capability skips. A backend's known defects are matched case by
case by the session (`defects.py`): a test whose failures are all known passes, and goes on drawing."""

from __future__ import annotations

import gc
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
SHRINK_SECONDS = "--gradcert-shrink-seconds"
DEVICE = "--gradcert-device"
DEADLINE = "--gradcert-deadline"
DRAW_UNTIL = "--gradcert-draw-until"

# cases drawn per test, and whether every run draws the same ones
PROFILES: dict[str, dict[str, Any]] = {
    "quick": {"examples": 12, "derandomize": True},
    "certify": {"examples": 250, "derandomize": True},
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
    g.addoption(
        SHRINK_SECONDS,
        type=float,
        default=30.0,
        help="seconds a new defect's shrink may take (fuzzing: all of a process's too)",
    )
    g.addoption(DEADLINE, type=float, default=None, help="wall-clock time (epoch s) by which all work ends (fuzzing)")
    g.addoption(DRAW_UNTIL, type=float, default=None, help="wall-clock time (epoch s) drawing new cases ends")
    g.addoption(DEVICE, default="cpu", choices=["cpu", "gpu"], help="where the backend and the oracles run cases")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gradcert_area(name): a gradcert certification area")
    _lifeline(config)


# the shared hold on a run's results lock of this process, kept for its life
_HOLD: list[int] = []


def _lifeline(config: pytest.Config) -> None:
    """Under a run that `gradcert` started (GRADCERT_RESULTS_LOCK set): an xdist worker dies with
    the pytest that started it (`lifeline.die_with_parent`: execnet starts it, gradcert cannot set
    that for it), and every process of the run that may write the results file holds the run's
    lock shared, so that a rerun is refused while any of them lives (`lifeline.py`)."""
    import os

    from gradcert.conformance import lifeline

    lock = os.environ.get(lifeline.LOCK)
    if not lock:
        return
    worker = hasattr(config, "workerinput")
    if worker:
        lifeline.die_with_parent()
    else:  # (its xdist workers watch this process, where the kernel's signal is not to be had)
        os.environ[lifeline.PARENT] = str(os.getpid())
    if not _HOLD:
        try:
            _HOLD.append(lifeline.share(lock))
        except lifeline.Held as e:
            raise pytest.UsageError(f"{lock}: another run (pid {e.pid}) holds this results file") from None


@pytest.fixture(scope="session")
def gradcert_session(request: pytest.FixtureRequest) -> Any:
    from gradcert.conformance.session import Session

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
        device=c.getoption(DEVICE),
        deadline=c.getoption(DEADLINE),
        draw_until=c.getoption(DRAW_UNTIL),
    )
    # What is loaded by now (pytest, hypothesis, the backend's framework) lives for the whole run:
    # keep it out of the cyclic collector's scans, which every case's programs trigger
    # (bench/overhead.py measures a check's cost).
    gc.freeze()
    yield s
    s.close()


@pytest.fixture
def gradcert(gradcert_session: Any, gradcert_search: Any, request: pytest.FixtureRequest) -> Any:
    """What a certification test's body calls to have its cases drawn and judged (`areas.Certify`):
    the backend's capabilities come with the session."""
    from gradcert.conformance.areas import Certify

    return Certify(gradcert_session, gradcert_search, request.node)


@pytest.fixture(scope="session")
def gradcert_search(request: pytest.FixtureRequest) -> Any:
    from gradcert.conformance.judging import Search

    c = request.config
    profile = c.getoption(PROFILE)
    db = c.getoption(DB) if profile == "nightly" else None
    return Search(
        **PROFILES[profile], shrink=not c.getoption(NO_SHRINK), db=db, shrink_seconds=c.getoption(SHRINK_SECONDS)
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(getattr(getattr(i, "obj", None), "_gradcert_area", None) for i in items):
        return
    from gradcert.backends.registry import UnknownBackend, resolve
    from gradcert.conformance.defects import KnownDefectsError, known_defects

    spec = config.getoption(BACKEND)
    try:
        backend = resolve(spec)
        known_defects(backend.name)  # (a bad file: one line, before anything runs)
    except (UnknownBackend, KnownDefectsError) as e:
        raise pytest.UsageError(str(e)) from None
    controller = not hasattr(config, "workerinput")
    # under xdist the controller collects nothing: the first worker records for all
    recorder = controller or getattr(config, "workerinput", {}).get("workerid") == "gw0"
    for item in items:
        area = getattr(getattr(item, "obj", None), "_gradcert_area", None)
        if area is None:
            continue
        item.add_marker(pytest.mark.gradcert_area(area.name))
        from gradcert.conformance.areas import test_id

        rel = test_id(item)
        missing = area.needs - backend.capabilities
        if missing:
            why = f"{backend.name} lacks {', '.join(sorted(missing))}"
            item.add_marker(pytest.mark.skip(reason=f"unsupported: {why}"))
            if recorder:  # on record, so that reports show the area as unsupported, not absent
                _record_unsupported(config, backend, area.name, rel, why)
    if all(getattr(getattr(i, "obj", None), "_gradcert_area", None) for i in items):
        # the heaviest tests first, so that xdist's workers, taking tests as they free up, finish
        # together: a linearity check asks for three gradients, then second order, deeper nesting,
        # more features; then the light ones that fill the workers' last gaps: bad requests (one
        # backend call, refused at once)
        items.sort(key=_weight, reverse=True)  # (stable, and the same in every worker)


def _weight(item: pytest.Item) -> tuple[bool, bool, int, int, int]:
    f, area = item.obj._gradcert_features, item.obj._gradcert_area  # type: ignore[attr-defined]
    light = area.check == "bad_request"
    return (not light, area.check == "linearity", area.order, f.max_depth, len(f.enabled))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
    """A failing case is reported as gradcert reports it (the verdict, the case, its replay
    command, with hypothesis's notes), not as a traceback through gradcert, hypothesis and pytest,
    whose formatting would cost more than judging the case (bench/overhead.py)."""
    from gradcert.conformance.session import CaseFailed

    if call.excinfo is None or not isinstance(call.excinfo.value, CaseFailed) or call.when == "collect":
        return None  # (pytest's own report)
    # the output captured while the test ran, as pytest's own report keeps it
    sections = [(f"Captured {key} {call.when}", text) for when, key, text in item._report_sections if when == call.when]
    return pytest.TestReport(
        item.nodeid,
        item.location,
        {k: 1 for k in item.keywords},
        "failed",
        str(call.excinfo.value),
        call.when,
        sections,
        call.duration,
        call.start,
        call.stop,
        item.user_properties,
    )


def _record_unsupported(config: pytest.Config, backend: Any, area: str, test: str, why: str) -> None:
    """One `unsupported` verdict for a whole test whose area needs a capability the backend lacks."""
    path = config.getoption(RESULTS)
    if not path:
        return
    from gradcert.conformance.results import ResultsFile, unsupported_record

    rec = unsupported_record(backend, area, test, why, config.getoption(PROFILE), config.getoption(SEED))
    ResultsFile(path).append(rec)
