"""`gradcert fuzz`: progress and summary, defects saved shrunk and replayable, known ones told
apart, kept across nights, an interrupted run resumed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..conftest import ENV, ROOT


def fuzz(
    tmp: Path, backend: str, minutes: str, areas: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gradcert.cli",
            "fuzz",
            "--backend",
            backend,
            "--minutes",
            minutes,
            "--areas",
            areas,
            "--db",
            str(tmp / "db"),
            "--findings",
            str(tmp / "findings"),
            "--results",
            str(tmp / "r.jsonl"),
            *extra,
        ],
        cwd=tmp,
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_fuzz_reference_shows_progress_and_finds_nothing(tmp_path: Path) -> None:
    r = fuzz(tmp_path, "reference", "0.15", "elementwise,if,while")
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert "cases/s" in r.stderr and "left" in r.stderr
    assert "0 new defect(s)" in r.stdout and "NEW" not in r.stdout
    table = r.stdout.split("cases by area")[1].split("\n\n")[0]
    assert "pass" in table and "fail" not in table


def test_fuzz_saves_shrunk_replayable_findings_and_keeps_them_across_nights(tmp_path: Path) -> None:
    r = fuzz(tmp_path, "tests.mutants:WrongSinRule", "0.3", "elementwise", "--isolate", "no")
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    index = json.loads((tmp_path / "findings" / "index.json").read_text())
    assert index and all(Path(p).exists() for p in index.values())
    saved = list((tmp_path / "findings").rglob("*.case"))
    assert set(index.values()) <= set(map(str, saved)) and len(saved) <= 3  # one per defect and test
    for path in index.values():
        text = Path(path).read_text()
        assert "sin(" in text
        rep = subprocess.run(
            [sys.executable, "-m", "gradcert.cli", "replay", path, "--backend", "tests.mutants:WrongSinRule"],
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
        )
        assert rep.returncode == 1 and "verdict: fail" in rep.stdout
    # the next night: signatures found before are never new again; the database holds the examples
    again = fuzz(tmp_path, "tests.mutants:WrongSinRule", "0.05", "elementwise", "--isolate", "no")
    assert any((tmp_path / "db").rglob("*")), "the example database kept nothing"
    assert "0 new defect(s)" in again.stdout and again.returncode == 0, again.stdout
    assert set(index) <= set(json.loads((tmp_path / "findings" / "index.json").read_text()))
    # and the night's first cases are the database's (the shrunk failures, not drawn again by seed)
    night = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    night = night[max(i for i, r in enumerate(night) if r.get("run") == "start") :]
    assert any(r.get("case_id") and "draw" not in r and r["status"] == "fail" for r in night)


def test_interrupted_fuzz_keeps_its_results_and_resumes(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "gradcert.cli",
        "fuzz",
        "--backend",
        "reference",
        "--minutes",
        "5",
        "--areas",
        "elementwise",
        "--db",
        str(tmp_path / "db"),
        "--results",
        str(tmp_path / "r.jsonl"),
    ]
    p = subprocess.Popen(cmd, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = tmp_path / "r.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 30):
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130 and "INCOMPLETE (SIGINT): run the same command again to resume" in out, out
    first = [json.loads(x) for x in results.read_text().splitlines() if x.endswith("}")]
    assert len(first) >= 30 and first[-1]["run"] == "end" and not first[-1]["complete"]
    r = fuzz(tmp_path, "reference", "0.05", "elementwise")
    assert r.returncode == 0
    after = [json.loads(x) for x in results.read_text().splitlines()]
    keys = [(x["test_id"], x["case_id"]) for x in after if "case_id" in x]
    assert after[: len(first)] == first and len(after) > len(first) and len(keys) == len(set(keys))


def test_a_known_defect_met_again_is_reported_as_known_not_new(tmp_path: Path) -> None:
    """A night's failures of one of the backend's known defects are KNOWN, not new, and do not fail
    the night (a first night of PyTorch reported its known `pow` defect as new); another defect in
    the same area is new."""
    env = {**ENV, "GRADCERT_KNOWN_DEFECTS": str(ROOT / "tests" / "known")}
    r = fuzz(tmp_path, "tests.mutants:KnownAndNewInLoops", "0.1", "while", "--isolate", "no", env=env)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "KNOWN known-and-new-in-loops: op exp | wrong value" in r.stdout
    # the new defect, a loop's (the planted rewrite of the loop's backward also meets a carried
    # value's accumulation in the body now and then: a random night may show that construct too)
    new = [x for x in r.stdout.splitlines() if x.startswith("NEW")]
    assert any(x.startswith(f"NEW known-and-new-in-loops: {NEW}") for x in new), r.stdout[-3000:]
    assert all(x.startswith("NEW known-and-new-in-loops: while") for x in new), r.stdout[-3000:]
    index = json.loads((tmp_path / "findings" / "index.json").read_text())
    # the known one is on file, not in the index
    assert index and all(sig.startswith("while") for sig in index), index


NEW = "while: a captured value's accumulation across trips | wrong value"


def test_a_bad_known_defects_file_stops_the_night_before_it_starts(tmp_path: Path) -> None:
    """Known defects are read before the night: a file that does not parse, or names a case file
    that is not there, is one line naming it, exit 2, and nothing run."""
    for name, text in (("garbled", "[[defect\n"), ("missing", _entry("nowhere.case"))):
        folder = tmp_path / name / "known"
        folder.mkdir(parents=True)
        (folder / "torch.toml").write_text(text)
        r = subprocess.run(
            [sys.executable, "-m", "gradcert.cli", "fuzz", "--backend", "torch", "--minutes", "0.05"]
            + ["--areas", "elementwise", "--results", str(tmp_path / name / "r.jsonl")]
            + ["--findings", str(tmp_path / name / "f"), "--db", str(tmp_path / name / "db")],
            cwd=tmp_path,
            env={**ENV, "GRADCERT_KNOWN_DEFECTS": str(folder)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith(f"gradcert: error: {folder / 'torch.toml'}:"), r.stderr
        assert not (tmp_path / name / "r.jsonl").exists()


def _entry(case: str) -> str:
    return f'[[defect]]\narea = "while"\noracle = "reference"\nkind = "wrong value"\ncase = "{case}"\nreason = "r"\n'


def test_fuzz_ends_within_its_minutes_shrinking_and_localization_included(tmp_path: Path) -> None:
    """A backend wrong in every area on programs of five ops or more (no derived case shows it:
    each defect is shrunk), fuzzed for half a minute with a shrink allowance of a minute per
    defect: the night ends within its minutes and the stated margin (docs/certifying.md: 30 s),
    and the live line says which defect is being shrunk."""
    t = time.monotonic()
    r = fuzz(tmp_path, "tests.mutants:WrongOnBigPrograms", "0.5", "", "--workers", "2", "--shrink-seconds", "60")
    took = time.monotonic() - t
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert took <= 30 + 30, took
    assert "new defect(s)" in r.stdout and "NEW" in r.stdout
    assert "shrinking defect" in r.stderr
    recs = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert recs[-1]["run"] == "end" and recs[-1]["complete"]
    assert "shrinking" in (tmp_path / "r.jsonl.progress").read_text()  # (the live line's notes)
