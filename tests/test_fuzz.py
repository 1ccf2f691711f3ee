"""`gradcert fuzz`: progress and summary, findings saved shrunk and replayable, deduplicated and
kept across nights, an interrupted run resumed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import ENV


def fuzz(tmp: Path, backend: str, minutes: str, areas: str, *extra: str) -> subprocess.CompletedProcess[str]:
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
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_fuzz_reference_shows_progress_and_finds_nothing(tmp_path: Path) -> None:
    r = fuzz(tmp_path, "reference", "0.15", "elementwise,if,while")
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert "cases/s" in r.stderr and "left" in r.stderr
    assert "0 new finding(s)" in r.stdout
    assert "fail" not in r.stdout.split("cases in")[1].split("\n")[0]


def test_fuzz_saves_shrunk_replayable_findings_and_keeps_them_across_nights(tmp_path: Path) -> None:
    r = fuzz(tmp_path, "tests.mutants:WrongSinRule", "0.3", "elementwise", "--isolate", "no")
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    index = json.loads((tmp_path / "findings" / "index.json").read_text())
    assert index and all(Path(p).exists() for p in index.values())
    saved = list((tmp_path / "findings").rglob("*.case"))
    assert sorted(map(str, saved)) == sorted(index.values())  # only the smallest per signature is kept
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
    # the next night: known signatures are never new again; the database holds the examples
    again = fuzz(tmp_path, "tests.mutants:WrongSinRule", "0.05", "elementwise", "--isolate", "no")
    assert any((tmp_path / "db").rglob("*")), "the example database kept nothing"
    assert not any(f"NEW {sig}\n" in again.stdout for sig in index), again.stdout
    assert set(index) <= set(json.loads((tmp_path / "findings" / "index.json").read_text()))


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
    assert "interrupted: run again to resume" in out
    first = [json.loads(x) for x in results.read_text().splitlines() if x.endswith("}")]
    assert len(first) >= 30
    r = fuzz(tmp_path, "reference", "0.05", "elementwise")
    assert r.returncode == 0
    after = [json.loads(x) for x in results.read_text().splitlines()]
    keys = [(x["test_id"], x["case_id"]) for x in after]
    assert after[: len(first)] == first and len(after) > len(first) and len(keys) == len(set(keys))


def test_a_known_failure_met_again_is_reported_as_known_not_new(tmp_path: Path) -> None:
    """A night's smallest failing case that is one of the backend's known failures on file
    (`known_failures/<backend>/`) is known, not new: with its findings folder still empty, a
    night of PyTorch reported PyTorch's known `pow` defect as new (and failed). Another program
    failing the same test is still new."""
    from gradcert.conformance.fuzz import _dedupe, _on_file, signature
    from gradcert.conformance.plugin import known_cases

    (known,) = [p for p in known_cases("torch") if p.name == "second_order-reference-ea733a314299.case"]
    on_file = _on_file("torch")
    saved = tmp_path / "findings" / "torch"
    saved.mkdir(parents=True)
    records = []
    for name, text in (("a", known.read_text()), ("b", known.read_text().replace("sigmoid", "tanh"))):
        path = saved / f"second_order-reference-{name}.case"
        path.write_text(text)
        records.append(
            {"test_id": f"test_second_order.py::t{name}", "area": "second_order", "status": "fail"}
            | {"oracle": "reference", "case": text, "case_file": str(path), "size": 3}
        )
    new, met = _dedupe(records, tmp_path / "findings", {}, on_file)
    assert met == {signature(records[0]): str(known)}
    assert new == {signature(records[1]): records[1]["case_file"]}
    assert not Path(records[0]["case_file"]).exists() and Path(records[1]["case_file"]).exists()
    index = json.loads((tmp_path / "findings" / "index.json").read_text())
    assert index == new  # (the known failure is on file in the package, not in the night's index)


def test_a_bad_known_failure_file_stops_the_night_before_it_starts(tmp_path: Path) -> None:
    """Known failures are read before the night: a case file that does not parse, or is not named
    as findings are, is one line naming it, exit 2, and nothing run."""
    for name, text in (("second_order-reference-abc.case", "garbage\n"), ("oops.case", "")):
        folder = tmp_path / name / "known"
        (folder / "torch").mkdir(parents=True)
        (folder / "torch" / name).write_text(text)
        r = subprocess.run(
            [sys.executable, "-m", "gradcert.cli", "fuzz", "--backend", "torch", "--minutes", "0.05"]
            + ["--areas", "elementwise", "--results", str(tmp_path / name / "r.jsonl")]
            + ["--findings", str(tmp_path / name / "f"), "--db", str(tmp_path / name / "db")],
            cwd=tmp_path,
            env={**ENV, "GRADCERT_KNOWN_FAILURES": str(folder)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith(f"gradcert: error: {folder / 'torch' / name}:"), r.stderr
        assert not (tmp_path / name / "r.jsonl").exists()
