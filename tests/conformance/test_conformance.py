"""The conformance core: backend lookup, the isolated runner with real processes, the results
file and resuming, replay, and the oracles on hand-made wrong answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gradcert.backends import ReferenceBackend, UnknownBackend, resolve
from gradcert.backends.protocol import REF_ATOL, REF_RTOL, TOLERANCES, BackendResult, close
from gradcert.backends.registry import backend_name
from gradcert.conformance.areas import AREAS
from gradcert.conformance.isolation.runner import Isolated, Outcome
from gradcert.conformance.judging import recorded_text, redraw
from gradcert.conformance.oracles import finite_differences, judge, semantics
from gradcert.conformance.results import ResultsFile, ResultsFileError, read_records
from gradcert.generators import draw_case

from ..conftest import ENV, ROOT, run_cli
from ..mutants import NoLoops, UnusedFullLike
from .test_mutants import certify


def test_unknown_backend_is_one_line_and_exit_2(tmp_path: Path) -> None:
    r = run_cli("certify", "--backend", "no-such-backend", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "gradcert: error: unknown backend 'no-such-backend' "
        "(known: jax, jax-eager, jax-jit, paddle, reference, tensorflow, torch; "
        "or use module:attribute)"
    ]
    with pytest.raises(UnknownBackend, match="cannot load backend"):
        resolve("no_such_module:thing")


@pytest.mark.parametrize(
    ("name", "module"), [("paddle", "paddle"), ("torch", "torch"), ("jax", "jax"), ("tensorflow", "tensorflow")]
)
def test_a_framework_backend_is_resolved_without_importing_its_framework(
    name: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # certify's pytest asks an isolated backend only its name, capabilities and version
    code = f"import sys; from gradcert.backends import resolve; resolve({name!r}); print({module!r} in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.stdout.strip() == "False", r.stderr[-2000:]
    # and one whose framework is not installed says which extra to install
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == module else real(m, *a))
    with pytest.raises(UnknownBackend, match=rf"cannot start: the {name} backend needs .*gradcert\[{name}\]"):
        resolve(name)
    # certify's own process checks the name alone, as strictly
    with pytest.raises(UnknownBackend, match=rf"cannot start: the {name} backend needs .*gradcert\[{name}\]"):
        backend_name(name)


def test_certify_own_process_imports_no_numpy_or_ir() -> None:
    # what `gradcert certify` imports before pytest starts its workers, and for the report
    code = (
        "import sys, gradcert.cli, gradcert.conformance.plugin, gradcert.reports.html\n"
        "from gradcert.conformance.areas import AREAS, command_line\n"
        "from gradcert.backends.registry import backend_name\n"
        "assert [backend_name(b) for b in ('reference', 'paddle')] == ['reference', 'paddle']\n"
        "heavy = ('gradcert.reference.', 'gradcert.gen')\n"
        "light = ('gradcert.reference.collector',)  # (the cyclic collector's switch: the report pauses it)\n"
        "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith(heavy) and m not in light))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr[-2000:]


def test_backend_from_an_entry_point(tmp_path: Path) -> None:
    dist = tmp_path / "thirdparty-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[gradcert.backends]\nmine = tests.mutants:RelativeError\n")
    code = "from gradcert.backends import resolve; print(resolve('mine').name)"
    env = dict(ENV, PYTHONPATH=f"{tmp_path}{os.pathsep}{ENV['PYTHONPATH']}")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "relative-error"


def test_isolated_runner_survives_a_crash_and_a_hang() -> None:
    nested = next(
        c
        for c in map(draw_case, range(500))
        if any(op.name in ("if", "while") and op.parent is not c.program.block for op in c.program.walk())
    )
    plain = next(c for c in map(draw_case, range(500)) if not any(op.blocks for op in c.program.walk()))
    with_if = next(c for c in map(draw_case, range(500)) if any(op.name == "if" for op in c.program.walk()))
    crash = Isolated("tests.mutants:CrashOnNesting", timeout=20)
    try:
        out = crash.run(nested)
        # how it died, and the last lines it wrote (os.abort: SIGABRT)
        assert isinstance(out, Outcome) and out.status == "crash" and "killed by SIGABRT" in out.message
        assert "its last lines: " in out.message
        assert isinstance(crash.run(plain), BackendResult)  # a fresh worker takes the next case
        # a worker that had answered before dies on the case: a fresh one dies on it too
        out = crash.run(nested)
        assert isinstance(out, Outcome) and out.status == "crash" and "a fresh worker too" in out.message
    finally:
        crash.close()
    # a worker that dies of what earlier cases left: the case that met it is run again in a fresh
    # worker, and judged there
    damaged = Isolated("tests.mutants:CrashOnThirdCase", timeout=20)
    try:
        assert all(isinstance(damaged.run(plain), BackendResult) for _ in range(5))
        assert damaged.answered == 1  # (cases 3 and 5 killed a worker each: the third has run case 5)
    finally:
        damaged.close()
    hang = Isolated("tests.mutants:HangOnIf", timeout=1.5)
    try:
        t = time.monotonic()
        out = hang.run(with_if)
        assert isinstance(out, Outcome) and out.status == "timeout" and time.monotonic() - t < 10
        assert isinstance(hang.run(plain), BackendResult)
    finally:
        hang.close()


def test_a_warm_spare_takes_over_from_a_worker_that_died() -> None:
    """The spare worker, started ahead while cases ran, answers the case after a crash (no worker
    is started after the crash), and a new spare is started behind it; closing ends both."""
    nested = next(
        c
        for c in map(draw_case, range(500))
        if any(op.name in ("if", "while") and op.parent is not c.program.block for op in c.program.walk())
    )
    plain = next(c for c in map(draw_case, range(500)) if not any(op.blocks for op in c.program.walk()))
    iso = Isolated("tests.mutants:CrashOnNesting", timeout=20)
    try:
        out = iso.run(nested)  # (its first case: blamed at once, no fresh worker asked again)
        assert isinstance(out, Outcome) and out.status == "crash"
        assert iso.spare is not None and iso.proc is None
        spare = iso.spare[0]  # (started when the dead worker was ready)
        time.sleep(3)  # (the time a run's cases would give it to start)
        t = time.monotonic()
        assert isinstance(iso.run(plain), BackendResult)
        took = time.monotonic() - t
        assert iso.proc is spare and iso.spare is not None and iso.spare[0] is not spare
        assert took < 1.0, took  # (a worker started now takes longer: Python, NumPy and gradcert imported)
        pids = [iso.proc.pid, iso.spare[0].pid]
    finally:
        iso.close()
    time.sleep(0.5)
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z", pid


def test_a_crash_costs_a_fork_not_a_start() -> None:
    """Workers are forked by a zygote that has gradcert and the backend's module loaded: twenty
    workers killed one after another cost a few milliseconds each, where a worker started from
    nothing imports Python's, NumPy's and gradcert's modules first (about a second on a loaded
    machine: `bench/crashes.py`)."""
    plain = next(c for c in map(draw_case, range(500)) if not any(op.blocks for op in c.program.walk()))
    iso = Isolated("tests.mutants:KillsEveryCase", timeout=20)
    try:
        out = iso.run(plain)  # (the zygote's start)
        assert isinstance(out, Outcome) and out.status == "crash" and "killed by SIGKILL" in out.message
        assert iso.zygote is not None
        t = time.monotonic()
        outs = [iso.run(plain) for _ in range(20)]
        took = time.monotonic() - t
    finally:
        iso.close()
    assert all(isinstance(o, Outcome) and o.status == "crash" for o in outs)
    assert took < 6.0, took


def test_isolated_result_equals_in_process() -> None:
    c = draw_case(11)
    iso = Isolated("reference", timeout=30)
    try:
        a = iso.run(c)
    finally:
        iso.close()
    b = ReferenceBackend().run(c)
    assert isinstance(a, BackendResult)
    for x, y in zip(a.grads, b.grads):
        assert (x is None) == (y is None) and (x is None or np.array_equal(x, y))


def test_reference_checks_the_invariants_once_for_a_run_of_one_request() -> None:
    """A linearity check asks for three gradients of one program and request, other cotangents:
    the backward program is the same, and so are its violations, checked once."""
    case = next(c for c in (draw_case(s) for s in range(50)) if c.order == 1 and c.wrt)
    case = replace(case, cotangents=[np.ones(v.type.shape) for v in case.output_values])
    backend = UnusedFullLike()
    first = backend.run(case)
    again = backend.run(replace(case, cotangents=[2 * u for u in case.cotangents]))
    assert first.violations and again.violations == first.violations  # the left-over full_like
    assert "invariants" in first.timings and "invariants" not in again.timings
    other = backend.run(replace(case, cotangents=None))  # another request: checked again
    assert other.violations and "invariants" in other.timings
    assert not ReferenceBackend().run(replace(case, cotangents=[3 * u for u in case.cotangents])).violations


def test_directions_are_the_seeded_generators_normals_in_turn() -> None:
    """The finite differences' directions (and the linearity check's other cotangents) are what
    `default_rng(seed)` draws for each shape in turn, from a kept draw per seed or, past its
    length, from a generator: the same numbers whichever way, and the caller's to change."""
    from gradcert.conformance.oracles import _STREAM, normals

    for seed in range(20):
        shapes = [[(2, 3), (), (3,), (1, 3), (2, 1)][(seed + k) % 5] for k in range(1 + seed % 4)]
        rng = np.random.default_rng(seed)
        want = [rng.normal(size=shape) for shape in shapes]
        got = normals(seed, shapes)
        assert [g.shape for g in got] == shapes and all(np.array_equal(g, w) for g, w in zip(got, want))
    big = [(3,), (_STREAM,)]  # past the kept draw
    rng = np.random.default_rng(5)
    assert all(np.array_equal(g, rng.normal(size=s)) for g, s in zip(normals(5, big), big))
    got = normals(7, [(3,)])
    got[0][:] = 0  # the caller's copy
    assert normals(7, [(3,)])[0].any()


def test_a_linearity_pass_keeps_the_error_measured(tmp_path: Path) -> None:
    """The cotangents area checks linearity after finite differences: its pass is on record with
    the finite differences' error, as every other area's (the report plots them)."""
    from gradcert.conformance.session import Session

    area = AREAS["cotangents"]
    session = Session("reference", None, tmp_path, isolate=False)
    found = [session.judge(area, c) for c in (draw_case(s) for s in range(40)) if c.cotangents and c.order == 1]
    assert found and all(v.status == "pass" for v in found), found
    # (a case whose every input is held has no finite differences to measure)
    measured = [v for v in found if v.oracle == "finite_differences"]
    assert len(measured) > len(found) / 2 and any(v.max_abs > 0 for v in measured), found


def test_certify_runs_the_heaviest_tests_first_and_the_light_ones_last(tmp_path: Path) -> None:
    """So that xdist's workers finish together: linearity checks (three gradients a case) first,
    then the others, then the light ones that fill the workers' last gaps: bad requests (one call,
    refused at once)."""
    from gradcert.conformance.areas import PYTEST_ENV, command_line
    from gradcert.conformance.areas import tests as certify_tests

    args = command_line(list(AREAS), "paddle", "certify", str(tmp_path / "r.jsonl"), str(tmp_path), "auto", 60.0)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--collect-only"],  # (args hold -q: the ids, one a line)
        cwd=tmp_path,
        env={**ENV, **PYTEST_ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    by_name = {test_id.partition("::")[2]: test_id for test_id in certify_tests()}
    ids = [by_name[line.rpartition("::")[2]] for line in r.stdout.splitlines() if "::" in line]
    assert len(ids) == len(by_name) == 43, r.stdout[-2000:] + r.stderr[-2000:]
    assert ids[-1].startswith("test_bad_requests.py")  # bad requests last
    assert all(i.startswith("test_cotangents.py") for i in ids[:2])  # linearity first
    # and xdist hands them out one at a time (none waits behind a heavy test while a worker idles)
    parallel = command_line(list(AREAS), "paddle", "certify", "r.jsonl", ".", "auto", 60.0, "2")
    assert parallel[-4:] == ["-n", "2", "--maxschedchunk", "1"]


def test_killed_certify_resumes_without_redoing_finished_cases(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "gradcert.cli",
        "certify",
        "--backend",
        "reference",
        "--profile",
        "quick",
        "--areas",
        "elementwise,if,while",
        "--results",
        str(tmp_path / "r.jsonl"),
        "--report",
        str(tmp_path / "r.html"),
    ]
    p = subprocess.Popen(
        cmd, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    results = tmp_path / "r.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 20):
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    before = [json.loads(x) for x in results.read_text().splitlines() if x.strip().endswith("}")]
    assert 20 <= len(before)
    r = subprocess.run(cmd, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:]
    after = list(read_records([results]))
    keys = [(x["test_id"], x["case_id"]) for x in after if "case_id" in x]
    assert len(keys) == len(set(keys)), "a finished case was run again"
    assert {(x["test_id"], x["case_id"]) for x in before if "case_id" in x} <= set(keys)
    clean_dir = tmp_path / "clean"
    clean_dir.mkdir()
    clean = subprocess.run(
        [*cmd[:-4], "--results", str(clean_dir / "r.jsonl"), "--report", str(clean_dir / "r.html")],
        cwd=clean_dir,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert clean.returncode == 0
    again = {(x["test_id"], x["case_id"]) for x in read_records([clean_dir / "r.jsonl"]) if "case_id" in x}
    assert again == set(keys)


def test_replay_reproduces_a_saved_failure(tmp_path: Path) -> None:
    # (sin squashes loop values: about half of the loop cases have one, a tenth of elementwise's)
    code, records, _ = certify("tests.mutants:WrongSinRule", "elementwise,while", tmp_path, "--isolate", "no")
    assert code == 1
    saved = next(r["case_file"] for r in records if "defect" in r)
    bad = run_cli("replay", str(saved), "--backend", "tests.mutants:WrongSinRule", cwd=tmp_path)
    assert bad.returncode == 1 and "verdict: fail (reference)" in bad.stdout
    good = run_cli("replay", str(saved), "--backend", "reference", cwd=tmp_path)
    assert good.returncode == 0 and "verdict: pass" in good.stdout


def test_replay_of_a_pass_named_as_the_reports_name_it(tmp_path: Path) -> None:
    code, records, _ = certify("reference", "while", tmp_path)
    assert code == 0
    r = next(r for r in records if r.get("draw", "").startswith("seed:"))
    assert "case" not in r  # a pass is on record by its draw
    name = f"{r['test_id']}[{r['case_id']}]"  # as the JUnit report names it
    ok = run_cli("replay", name, cwd=tmp_path)
    assert ok.returncode == 0 and "verdict: pass" in ok.stdout
    assert ok.stdout.split("verdict:")[0] == redraw(r["test_id"], r["draw"]).to_text().split("---")[0]
    bad = run_cli("replay", "test_while.py::test_nothing[seed:1f]", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "gradcert: error: 'test_while.py::test_nothing' is not a certification test"
    ]


def test_replay_of_a_malformed_case_is_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "bad.case"
    f.write_text('program() {\n  return\n}\n---\n{"format": "gradcert-case/1"}\n')
    r = run_cli("replay", str(f), cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "lacks or misnames" in r.stderr


def test_results_file_skips_a_torn_last_line_and_names_a_bad_one(tmp_path: Path) -> None:
    f = ResultsFile(tmp_path / "r.jsonl")
    f.append({"test_id": "t", "case_id": "a", "status": "pass"})
    with open(f.path, "a") as h:
        h.write('{"test_id": "t", "case_')  # a writer killed mid-line
    assert list(f.finished()) == [(("t", "a"), ("pass", "", "", "", ""))]
    with open(f.path, "a") as h:
        h.write("\n{}\n")
    with pytest.raises(ResultsFileError, match=r"r.jsonl:2: not a JSON record"):
        list(read_records([f.path]))


def test_oracles_catch_hand_made_wrong_answers() -> None:
    case = next(
        c
        for c in map(draw_case, range(200))
        if c.order == 1 and any(g is not None for g in ReferenceBackend().run(c).grads)
    )
    ref = ReferenceBackend().run(case)
    assert judge(case, ref, ref).status in ("pass", "invalid")
    k = next(i for i, g in enumerate(ref.grads) if g is not None)
    none = BackendResult([None if i == k else g for i, g in enumerate(ref.grads)])
    assert semantics(case, none, ref).oracle == "semantics"  # type: ignore[union-attr]
    off = BackendResult([g if i != k else g + 0.01 for i, g in enumerate(ref.grads)])
    v = judge(case, off, ref)
    assert v.status == "fail" and v.oracle == "reference"
    fd = finite_differences(case, off)
    if fd is not None and fd.status != "invalid":  # an input the perturbation moves: FD localises it
        assert fd.status == "fail" and fd.inputs == [case.program.inputs[case.wrt[k]].name]
    # a NaN is a non-finite gradient whose error is said as infinite, not as 0
    nan = BackendResult([g if i != k else g * float("nan") for i, g in enumerate(ref.grads)])
    v = judge(case, nan, ref)
    assert v.status == "fail" and v.max_abs == float("inf") and "max abs inf" in v.message, v.message


def test_every_area_has_a_module() -> None:
    mods = {p.stem[5:] for p in (ROOT / "src" / "gradcert" / "conformance" / "areas").glob("test_*.py")}
    assert mods == set(AREAS)


def test_every_certification_test_asks_for_its_areas_check() -> None:
    """A test's body names the check its cases get; replaying a saved case judges it by its area's
    check, so the two must agree, and the body must ask for exactly one."""
    from gradcert.conformance.areas import tests as certify_tests

    class Asked:
        def __init__(self) -> None:
            self.checks: list[str] = []

        def gradients(self) -> None:
            self.checks.append("gradients")

        def linearity(self) -> None:
            self.checks.append("linearity")

        def bad_request(self) -> None:
            self.checks.append("bad_request")

    for test_id, test in certify_tests().items():
        asked = Asked()
        test(asked)
        assert asked.checks == [test._gradcert_area.check], test_id  # type: ignore[attr-defined]
    # and a body that asks for another check than its area's is refused when it runs
    from gradcert.conformance.areas import AREAS as areas
    from gradcert.conformance.areas import Certify

    class Node:
        function = certify_tests()["test_cotangents.py::test_cotangents"]
        module = type("M", (), {"__name__": "gradcert.conformance.areas.test_cotangents"})
        name = "test_cotangents"

    with pytest.raises(TypeError, match="asks for gradients, but area cotangents's cases are judged by linearity"):
        Certify(None, None, Node()).gradients()
    assert areas["cotangents"].check == "linearity"


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "cases").glob("*.case")), ids=lambda p: p.stem)
def test_saved_regressions_pass_on_the_reference(path: Path) -> None:
    """Cases the suite once failed the reference on, kept as regressions."""
    from gradcert.conformance.session import Session
    from gradcert.generators import load_case

    case = load_case(path)
    assert Session("reference", None, "reports/findings").judge(AREAS[case.area], case).status == "pass"


def test_known_defects_are_counted_and_the_search_goes_on(tmp_path: Path) -> None:
    """A known defect's cases are `known` (not failing) and every case of the budget is judged;
    a known defect no case shows is reported as not reproduced, by name."""
    known = tmp_path / "known"
    (known / "wrong-sin-rule").mkdir(parents=True)
    sin = ROOT / "tests" / "known" / "wrong-sin-and-cos-rules" / "4d75ce15ec26.case"
    exp = ROOT / "tests" / "known" / "known-and-new-in-loops" / "b932bcfb32c7.case"
    (known / "wrong-sin-rule" / "sin.case").write_text(sin.read_text())
    (known / "wrong-sin-rule" / "exp.case").write_text(
        exp.read_text().replace('"area": "while"', '"area": "elementwise"')
    )
    entry = '[[defect]]\nculprit = "op {0}"\nkind = "wrong value"\ncase = "wrong-sin-rule/{0}.case"\nreason = "r"\n'
    (known / "wrong-sin-rule.toml").write_text(entry.format("sin") + entry.format("exp"))
    env = dict(ENV, GRADCERT_KNOWN_DEFECTS=str(known))
    r = run_cli(
        "certify",
        "--backend",
        "tests.mutants:WrongSinRule",
        "--profile",
        "quick",
        "--areas",
        "elementwise,while,if",
        "--isolate",
        "no",
        "--results",
        str(tmp_path / "r.jsonl"),
        "--report",
        str(tmp_path / "r.html"),
        cwd=tmp_path,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-2000:]
    records = [x for x in read_records([tmp_path / "r.jsonl"]) if "case_id" in x]
    assert len([x for x in records if x["area"] == "while"]) == 24  # every case, past the known ones
    statuses = {x["status"] for x in records}
    assert "known" in statuses and not statuses & {"fail", "error"}, statuses
    assert "KNOWN wrong-sin-rule: op sin | wrong value" in r.stdout
    # the known defects no case showed: judged again, their case (a sin-free program) passes
    assert "NOT REPRODUCED (fixed?) op exp | wrong value" in r.stdout
    assert "PASSED" in r.stdout


def test_exhaustive_mode_judges_every_element() -> None:
    from gradcert.conformance.oracles import full_jacobian

    case = next(
        c
        for c in map(draw_case, range(300))
        if sum(c.inputs[i].size for i in c.wrt) <= 12 and any(g is not None for g in ReferenceBackend().run(c).grads)
    )
    ref = ReferenceBackend().run(case)
    assert full_jacobian(case, ref) is None
    k = next(i for i, g in enumerate(ref.grads) if g is not None)
    off = [g.copy() if g is not None else None for g in ref.grads]
    off[k].flat[0] += 1e-3  # type: ignore[union-attr]
    v = full_jacobian(case, BackendResult(off))
    if v is None or v.status != "invalid":
        assert v is not None and v.status == "fail" and v.inputs == [case.program.inputs[case.wrt[k]].name]


def test_capabilities_narrow_every_area_and_skip_what_needs_them(tmp_path: Path) -> None:
    code, records, out = certify(
        "tests.mutants:NoLoops", "inplace,while,nesting,multi_output", tmp_path, "--isolate", "no"
    )
    assert code == 0, out[-3000:]
    judged = [r for r in records if r.get("case_id")]
    assert {r["area"] for r in judged} == {"inplace", "multi_output"}
    drawn = [recorded_text(r, NoLoops.capabilities) for r in judged]
    assert all("while(" not in text for text in drawn)
    assert "unsupported" in out
    # the skipped areas are on record as unsupported, one verdict per test, naming what is lacking
    whole = [r for r in records if r.get("case_id") == ""]
    assert {r["area"] for r in whole} == {"while", "nesting"}
    assert all(r["status"] == "unsupported" and "lacks" in r["message"] and "while" in r["message"] for r in whole)


def test_forward_comparison_agrees_with_allclose() -> None:
    """The lowering oracle's fast comparison decides as np.allclose does, infinities and NaN included."""
    vals = [0.0, 1.0, -1.0, 1.0 + 1e-10, 1.0 + 1e-8, 1e-11, -1e-9, np.inf, -np.inf, np.nan]
    for a in vals:
        for b in vals:
            y, r = np.array([a, 0.5]), np.array([b, 0.5])
            assert close(y, r, TOLERANCES["f64"]) == np.allclose(y, r, rtol=REF_RTOL, atol=REF_ATOL, equal_nan=True), (
                a,
                b,
            )


def test_finite_differences_make_a_failing_estimate_again_with_a_smaller_step() -> None:
    """A steep program (`x xT` squared three times under `sin`: found by a minute of nightly
    fuzzing, judged a failure of the reference): at the oracle's step its estimate is off by
    truncation alone; made again at a smaller step it agrees with the right gradient, and a
    gradient off by 1e-5 still fails."""
    from gradcert.backends.protocol import FD_RTOL
    from gradcert.conformance.oracles import _setup, normals
    from gradcert.generators.case import load_case
    from gradcert.reference.finite_diff import STEP, directional

    case = load_case(ROOT / "tests" / "cases" / "matmul_power_curvature.case")
    got = ReferenceBackend(listing=False).run(case)
    s = _setup(case)
    direction = [None if i not in case.wrt else v for i, v in enumerate(normals(0, [x.shape for x in case.inputs]))]
    pred = sum(float(np.vdot(g, direction[i])) for g, i in zip(got.grads, case.wrt) if g is not None)
    first = directional(s.program, s.inputs, direction, s.cotangents, s.held, STEP, base=s.base).value
    assert abs(first - pred) > FD_RTOL * abs(pred)  # (the false alarm: the first estimate fails)
    v = finite_differences(case, got)
    assert v is not None and v.status == "pass" and v.max_rel < 1e-8, v
    off = finite_differences(case, replace(got, grads=[None if g is None else g * (1 + 1e-5) for g in got.grads]))
    assert off is not None and off.status == "fail" and off.inputs == ["x1"], off
