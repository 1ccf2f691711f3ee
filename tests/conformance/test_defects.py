"""Defect-level certification: every case judged, failures grouped into distinct defects by cause
(localized: `localize.py`), known defects matched per cause, regressions against a baseline, honest
endings. Each run is a real `gradcert certify` subprocess on backends with planted defects
(tests/mutants.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gradcert.conformance.defects import KnownDefectsError, canonical, entries, kind, known_defects, signature
from gradcert.generators.case import parse_case

from ..conftest import ENV, ROOT, certify, records

KNOWN = ENV | {"GRADCERT_KNOWN_DEFECTS": str(ROOT / "tests" / "known")}


def run(backend: str, tmp: Path, areas: str, *extra: str, env: dict[str, str] | None = None) -> tuple[Any, list[Any]]:
    return certify(backend, tmp, extra=["--areas", areas, "--isolate", "no", "--shrink-seconds", "5", *extra], env=env)


def cases(recs: list[Any]) -> list[Any]:
    return [r for r in recs if "case_id" in r and "defect" not in r]


def new_defects(out: str) -> list[str]:
    return [line.split(": ", 1)[1].split("  (")[0] for line in out.splitlines() if line.startswith("NEW")]


# --- signatures --------------------------------------------------------------------------------
def test_the_kind_of_a_discrepancy_is_read_off_the_verdict() -> None:
    assert kind("fail", "semantics", "%x0: got None but it has a path to the outputs") == (
        "None where a gradient belongs"
    )
    assert kind("fail", "semantics", "%x1: got a gradient but no gradient belongs to it") == (
        "a gradient where none belongs"
    )
    # zeros are a wrong value too: one wrong rule gives zeros in one case, other values in the next
    assert kind("fail", "reference", "m", {"x0": [[0.0, 0.0]], "x1": [1.0]}, ["x0"]) == "wrong value"
    assert kind("fail", "reference", "m", {"x0": [[0.5, 0.0]]}, ["x0"]) == "wrong value"
    assert kind("fail", "reference", "m", {"x0": [float("nan")]}, ["x0"]) == "non-finite gradient"
    # which op is left over varies with the program: not part of the kind
    dead = kind("fail", "invariants", "dead backward op 'pd_op.tanh_grad' has no use")
    assert dead == kind("fail", "invariants", "dead backward op 'pd_op.exp_grad' has no use (line 7)")
    assert dead != kind("fail", "invariants", "zero-fill 'pd_op.full_like' has no use")
    # an exception: its type and message, with what varies from case to case blanked
    a = kind("error", "backend", "RuntimeError: tensor %x3 of shape [2, 3] holds no memory (at 0x55b1)")
    assert a == kind("error", "backend", "RuntimeError: tensor %y of shape [4] holds no memory (at 0x7f00)")
    assert a != kind("error", "backend", "TypeError: tensor %x3 of shape [2, 3] holds no memory")
    # how a process died is in the message: one native fault aborts in one run, segfaults in the next
    assert kind("crash", "backend", "worker killed by SIGSEGV; its last lines: ...") == "crash"
    assert kind("refused", "backend", "no lowering") == "refused"
    assert signature("op sin", "wrong value") == "op sin | wrong value"


def test_canonical_form_is_the_op_skeleton_with_nesting() -> None:
    assert canonical(parse_case(_LOOP.replace("TRIPS", "2.0"))) == "while{cond: less_than; body: sin add}"


def test_a_known_defects_file_that_is_wrong_is_an_error_naming_it(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("GRADCERT_KNOWN_DEFECTS", str(tmp_path))
    (tmp_path / "b.toml").write_text('[[defect]]\nculprit = "op sin"\n')
    with pytest.raises(KnownDefectsError, match=r"b\.toml: defect 1 lacks kind, case, reason"):
        known_defects("b")
    entry = '[[defect]]\nculprit = "op sin"\nkind = "wrong value"\ncase = "CASE"\nreason = "z"\n'
    (tmp_path / "b.toml").write_text(entry.replace("CASE", "no.case"))
    with pytest.raises(KnownDefectsError, match="no case file no.case"):
        known_defects("b")
    (tmp_path / "one.case").write_text(_LOOP)
    (tmp_path / "b.toml").write_text(entry.replace("CASE", "one.case") * 2)
    with pytest.raises(KnownDefectsError, match=r"defect 2 files 'op sin \| wrong value' again"):
        known_defects("b")
    (tmp_path / "b.toml").write_text("[[defect\n")
    with pytest.raises(KnownDefectsError, match=r"b\.toml"):
        known_defects("b")


def test_known_entries_are_written_from_a_results_file(tmp_path: Path) -> None:
    case = (ROOT / "tests" / "known" / "known-and-new-in-ifs" / "a1b6a3849752.case").read_text()
    rec = {"backend": "b", "status": "fail", "signature": "op tanh | wrong value"}
    text = entries([rec | {"case": case, "size": 5, "message": "m"}, rec | {"case": case, "size": 9}], tmp_path, "b")
    (tmp_path / "b.toml").write_text(text)
    got = known_defects_in(tmp_path, "b")
    assert list(got) == ["op tanh | wrong value"]
    assert (tmp_path / got[next(iter(got))].case).read_text() == case


_LOOP = """program(%x0: f64[3], %x1: f64[3]) {
  %0 = full() {dtype=i64, shape=[], value=1.0} : i64[]
  %1 = full() {dtype=i64, shape=[], value=0.0} : i64[]
  %2 = full() {dtype=i64, shape=[], value=TRIPS} : i64[]
  %9, %10 = while(%1, %x1) : i64[], f64[3] {
  ^cond(%3: i64[], %4: f64[3]):
    %5 = less_than(%3, %2) : bool[]
    yield(%5)
  ^body(%6: i64[], %7: f64[3]):
    %8 = sin(%x0) : f64[3]
    %11 = add(%6, %0) : i64[]
    yield(%11, %8)
  }
  return %10
}
---
{"format": "gradcert-case/1", "area": "", "seed": null, "outputs": [0], "wrt": [0, 1], "no_grad": [],
 "inputs": [{"dtype": "float64", "shape": [3], "data": [0.1, 0.2, 0.3]},
            {"dtype": "float64", "shape": [3], "data": [0.4, 0.5, 0.6]}],
 "cotangents": null, "order": 1, "cotangents2": null}
"""


def test_the_role_of_wrong_inputs_counts_only_what_the_run_executes() -> None:
    from gradcert.conformance.defects import role

    ran = parse_case(_LOOP.replace("TRIPS", "2.0"))
    assert role(ran, ["x0"]) == "of an input captured by a loop"
    assert role(ran, ["x1"]) == "of an input carried by a loop"
    # a loop that runs no trip passes its carried values through and reads no capture
    idle = parse_case(_LOOP.replace("TRIPS", "0.0"))
    assert role(idle, ["x0"]) == role(idle, ["x1"]) == "at the top level only"


def known_defects_in(folder: Path, backend: str) -> dict[str, Any]:
    old = os.environ.get("GRADCERT_KNOWN_DEFECTS")
    os.environ["GRADCERT_KNOWN_DEFECTS"] = str(folder)
    try:
        return known_defects(backend)
    finally:
        if old is None:
            del os.environ["GRADCERT_KNOWN_DEFECTS"]
        else:
            os.environ["GRADCERT_KNOWN_DEFECTS"] = old


# --- every case judged, one defect per cause -----------------------------------------------------
ONE_BUG = "a value read twice by one op | wrong value"


def test_one_bug_met_in_many_areas_is_one_defect(tmp_path: Path) -> None:
    """The gradient of a value read twice by one op not accumulated, in every binary op: met in
    every area that draws binary ops, one defect, its minimal case one op on one value."""
    r, recs = run("tests.mutants:RepeatedNotAccumulated", tmp_path, "elementwise,fanout,matmul,cotangents,multi_output")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    judged = cases(recs)
    assert len(judged) == 12 * len({x["test_id"] for x in judged})  # every case of the budget judged
    failing = [x for x in judged if x["status"] == "fail"]
    areas = {x["area"] for x in failing}
    assert len(areas) >= 4 and {x["signature"] for x in failing} == {ONE_BUG}, Counter(x["signature"] for x in failing)
    assert new_defects(r.stdout) == [ONE_BUG], r.stdout[-3000:]
    assert f"{len(failing)} case(s) in" in r.stdout and f"of {len(areas)} area(s)" in r.stdout
    minimal = [x for x in recs if "defect" in x]
    assert minimal and all(d["size"] == 1 for d in minimal), [d["case"] for d in minimal]
    page = (tmp_path / "r.html").read_text()
    assert page.count('data-signature="a value read twice by one op | wrong value"') == 1


def test_two_bugs_of_one_kind_in_two_ops_are_two_defects(tmp_path: Path) -> None:
    r, recs = run("tests.mutants:WrongSinAndCosRules", tmp_path, "elementwise", "--profile", "certify")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert sorted(new_defects(r.stdout)) == ["op cos | wrong value", "op sin | wrong value"], r.stdout[-3000:]


def test_a_known_bug_in_one_op_turns_no_new_bug_in_another_known(tmp_path: Path) -> None:
    """`sin`'s wrong rule on file, `cos`'s new, both wrong values of one area: a case is known only
    where its own cause is sin's; cos's cases fail, one defect."""
    r, recs = run("tests.mutants:WrongSinAndCosRules", tmp_path, "elementwise", "--profile", "certify", env=KNOWN)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert new_defects(r.stdout) == ["op cos | wrong value"], r.stdout[-3000:]
    judged = cases(recs)
    known = [x for x in judged if x["status"] == "known"]
    failing = [x for x in judged if x["status"] == "fail"]
    assert known and all(x["signature"] == "op sin | wrong value" and "= sin(" in x["case"] for x in known)
    assert failing and all(x["signature"] == "op cos | wrong value" and "= cos(" in x["case"] for x in failing)
    # a case with cos and no sin is never known
    assert not [x for x in known if "= sin(" not in x["case"]]
    assert "KNOWN wrong-sin-and-cos-rules: op sin | wrong value" in r.stdout


def test_a_new_defect_beside_a_known_one_in_the_same_area_is_found_once(tmp_path: Path) -> None:
    r, _ = run("tests.mutants:KnownAndNewInLoops", tmp_path, "while", env=KNOWN)
    assert new_defects(r.stdout) == [LOOP_BUG], r.stdout
    assert "KNOWN known-and-new-in-loops: op exp | wrong value" in r.stdout


LOOP_BUG = "while: a captured value's accumulation across trips | wrong value"
# the quick profile draws a unary op inside a taken branch too rarely for the new defect of
# KnownAndNewInIfs: the certify profile's 500 cases of the area do
CERTIFY = ("--profile", "certify")
BRANCHES = {"KnownAndNewInIfs"}


def test_a_runs_defects_accepted_as_known_make_the_next_run_pass(tmp_path: Path) -> None:
    accepted: list[str] = []
    for n in range(3):
        (tmp_path / str(n)).mkdir()
        env = ENV | {"GRADCERT_KNOWN_DEFECTS": str(tmp_path / "kd")}
        r, _ = run("tests.mutants:KnownAndNewInIfs", tmp_path / str(n), "if", *CERTIFY, env=env)
        if r.returncode == 0:
            break
        assert r.returncode == 1 and new_defects(r.stdout), r.stdout[-3000:]
        assert not set(new_defects(r.stdout)) & set(accepted), r.stdout  # accepted ones are known now
        accepted += new_defects(r.stdout)
        known = subprocess.run(
            [
                sys.executable,
                "-m",
                "gradcert.cli",
                "known",
                "r.jsonl",
                "--backend",
                "known-and-new-in-ifs",
                "-o",
                "../kd",
            ],
            cwd=tmp_path / str(n),
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert known.returncode == 0 and f"{len(new_defects(r.stdout))} defect(s) appended" in known.stdout, (
            known.stdout + known.stderr
        )
    assert r.returncode == 0 and "PASSED" in r.stdout and not new_defects(r.stdout), r.stdout
    assert sorted(accepted) == ["if | wrong value", "op tanh | wrong value"]
    assert len(known_defects_in(tmp_path / "kd", "known-and-new-in-ifs")) == 2


def test_a_shrunk_defect_fails_clearly_and_replays(tmp_path: Path) -> None:
    r, recs = run("tests.mutants:WrongSinRule", tmp_path, "elementwise,while")
    assert r.returncode == 1
    defects = [x for x in recs if "defect" in x]
    assert defects and all(d["shrunk"] and d["size"] <= 8 and d["max_rel"] >= 1e-8 for d in defects), defects
    assert "Traceback" not in r.stdout + r.stderr and "reproduce_failure" not in r.stdout
    replay = subprocess.run(
        [
            sys.executable,
            "-m",
            "gradcert.cli",
            "replay",
            defects[0]["case_file"],
            "--backend",
            "tests.mutants:WrongSinRule",
        ],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replay.returncode == 1 and "verdict: fail (reference)" in replay.stdout, replay.stdout + replay.stderr


@pytest.mark.parametrize(
    "backend,area,new",
    [("KnownAndNewInLoops", "while", LOOP_BUG), ("KnownAndNewInIfs", "if", "if | wrong value")],
)
def test_a_new_defect_beside_a_known_one_in_the_same_area_is_found(
    backend: str, area: str, new: str, tmp_path: Path
) -> None:
    profile = CERTIFY if backend in BRANCHES else ()
    r, recs = run(f"tests.mutants:{backend}", tmp_path, area, *profile, env=KNOWN)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert new_defects(r.stdout) == [new], r.stdout
    statuses = Counter(x["status"] for x in cases(recs))
    assert statuses["known"] > 0 and statuses["fail"] > 0 and sum(statuses.values()) == (500 if profile else 24), (
        statuses
    )
    assert f"KNOWN {backend.replace('KnownAndNewIn', 'known-and-new-in-').lower()}" in r.stdout
    page = (tmp_path / "r.html").read_text()
    assert "Defects: 1 new, 1 known" in page


def test_a_declared_capability_refused_fails(tmp_path: Path) -> None:
    r, recs = run("tests.mutants:RefuseZeroTrip", tmp_path, "while")
    assert r.returncode == 1, r.stdout[-3000:]
    assert any(x["status"] == "refused" for x in cases(recs))
    assert "NEW REFUSED refuse-zero-trip: while | refused" in r.stdout, r.stdout


def test_a_backend_that_declares_nothing_certifies_nothing(tmp_path: Path) -> None:
    r, recs = run("tests.mutants:NoLoops", tmp_path, "while")
    assert r.returncode == 1 and "nothing certified" in r.stdout, r.stdout
    assert {x["status"] for x in cases(recs)} == {"unsupported"}


def test_a_nondeterministic_backend_yields_a_nondeterministic_defect(tmp_path: Path) -> None:
    r, recs = run("tests.mutants:Flaky", tmp_path, "elementwise")
    assert r.returncode == 1
    assert any(x["status"] == "nondeterministic" for x in cases(recs))
    assert "NEW NONDETERMINISTIC flaky" in r.stdout and "answers differ when judged 3 times" in r.stdout


# --- regressions against a baseline ---------------------------------------------------------------
def test_baseline_same_backend_twice_passes_and_a_planted_regression_fails(tmp_path: Path) -> None:
    for d in ("base", "again", "worse", "better"):
        (tmp_path / d).mkdir()
    base = tmp_path / "base" / "r.jsonl"
    # (its zeros known, as they hide the wrong values of most cases)
    r, _ = run("tests.mutants:KnownAndNewInIfs", tmp_path / "base", "if", *CERTIFY, env=KNOWN)
    assert r.returncode == 1  # its wrong values are new
    r, _ = run("tests.mutants:KnownAndNewInIfs", tmp_path / "again", "if", *CERTIFY, "--baseline", str(base), env=KNOWN)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "0 regression(s)" in r.stdout and "still failing: if | wrong value" in r.stdout
    # the same backend with one more defect: its cases regress
    r, _ = run(
        "tests.mutants:KnownAndNewInIfsRegressed",
        tmp_path / "worse",
        "if",
        *CERTIFY,
        "--baseline",
        str(base),
        env=KNOWN,
    )
    assert r.returncode == 1, r.stdout[-3000:]
    assert "new: every op | zero-fill left without a use" in r.stdout and "regressed: test_if.py::" in r.stdout
    # a defect removed: listed as fixed
    r, _ = run(
        "tests.mutants:KnownAndNewInIfsFixed", tmp_path / "better", "if", *CERTIFY, "--baseline", str(base), env=KNOWN
    )
    assert r.returncode == 0, r.stdout[-3000:]
    assert "fixed: if | wrong value" in r.stdout
    page = (tmp_path / "better" / "r.html").read_text()
    assert 'id="baseline"' in page and "if | wrong value" in page


# --- honest endings -----------------------------------------------------------------------------
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_is_incomplete_and_resumes(sig: int, code: int, tmp_path: Path) -> None:
    args = [sys.executable, "-m", "gradcert.cli", "certify", "--backend", "tests.mutants:Slow", "--profile", "quick"]
    args += ["--areas", "elementwise,matmul", "--workers", "2", "--isolate", "no", "--results", "r.jsonl"]
    args += ["--report", "r.html", "--findings", "f"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(cases(records(tmp_path / "r.jsonl"))) < 5 and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, out + err
    assert "INCOMPLETE" in out and "PASSED" not in out, out
    page = (tmp_path / "r.html").read_text()
    assert 'id="incomplete"' in page and "of 60 planned cases judged" in page
    first = cases(records(tmp_path / "r.jsonl"))
    assert 0 < len(first) < 60
    time.sleep(1.0)  # no worker outlives the run: nothing more is appended
    assert len(cases(records(tmp_path / "r.jsonl"))) == len(first)
    again = subprocess.run(args, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    after = cases(records(tmp_path / "r.jsonl"))
    keys = [(x["test_id"], x["case_id"]) for x in after]
    assert len(keys) == len(set(keys)) == 60  # the rerun judged only what was left
    assert 'id="incomplete"' not in (tmp_path / "r.html").read_text()


def test_an_unwritable_results_path_is_one_line_and_touches_nothing(tmp_path: Path) -> None:
    (tmp_path / "r.html").write_text("the old report")
    (tmp_path / "file").write_text("")
    r, _ = run("reference", tmp_path, "elementwise", "--results", str(tmp_path / "file" / "r.jsonl"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stdout == "", r.stdout + r.stderr
    assert r.stderr.startswith(f"gradcert: error: {tmp_path / 'file'}") and "not a folder" in r.stderr
    assert (tmp_path / "r.html").read_text() == "the old report"


def test_a_results_file_that_is_not_json_lines_is_refused_before_running(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text('{"ok": 1}\nnot json\n{"ok": 2}\n')
    r, _ = run("reference", tmp_path, "elementwise")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stdout + r.stderr
    assert "r.jsonl:2: not a JSON record" in r.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_second_run_on_a_live_results_file_is_refused(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "gradcert.cli", "certify", "--backend", "tests.mutants:Slow", "--profile", "quick"]
    args += ["--areas", "elementwise", "--isolate", "no", "--results", "r.jsonl", "--report", "r.html"]
    first = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not cases(records(tmp_path / "r.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.2)
        second = subprocess.run(args, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stdout + second.stderr
        assert "a live run (pid" in second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
