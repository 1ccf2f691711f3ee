"""The HTML report, checked in a real headless Chromium: what a reader sees (matrix cells, a
failure's program text and replay command), with a screenshot kept as an artefact; and the JSON
summary and JUnit XML written beside it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from ..conftest import ROOT, run_cli

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTEFACTS = ROOT / "reports" / "screenshots"


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("the report test needs Debian's chromium: apt-get install chromium (.ci/run does)")
    return exe


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=tmp)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    ok = cli(tmp, "certify", "--profile", "quick", "--areas", "elementwise,if", "--results", "ref.jsonl")
    assert ok.returncode == 0, ok.stdout[-2000:]
    bad = cli(
        tmp,
        "certify",
        "--backend",
        "tests.mutants:WrongSinRule",
        "--profile",
        "quick",
        "--areas",
        "elementwise,while",  # (sin squashes loop values: about half of the loop cases have one)
        "--isolate",
        "no",
        "--results",
        "mut.jsonl",
    )
    assert bad.returncode == 1
    out = cli(tmp, "report", "ref.jsonl", "mut.jsonl", "-o", "both.html")
    assert out.returncode == 0, out.stderr
    return tmp / "both.html"


def render(exe: str, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = page.parent / "chromium-profile"
    return subprocess.run(
        [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_reader_sees_the_matrix_and_the_failure(report: Path) -> None:
    dom = render(chromium(), report, "--dump-dom").stdout
    assert "<table" in dom, "chromium rendered nothing"
    lines = [x for f in ("ref.jsonl", "mut.jsonl") for x in (report.parent / f).read_text().splitlines()]
    records = [r for r in map(json.loads, lines) if "case_id" in r and "defect" not in r]
    for backend in ("reference", "wrong-sin-rule"):
        row = re.search(rf'data-backend="{backend}".*?data-area="elementwise">(.*?)</tr>', dom, re.S)
        assert row, backend
        cells = dict(re.findall(r'data-status="(\w+)">(\d+)<', row.group(1)))
        mine = [r for r in records if r["backend"] == backend and r["area"] == "elementwise"]
        assert int(cells["pass"]) == sum(r["status"] == "pass" for r in mine)
        assert int(cells["fail"]) == sum(r["status"] == "fail" for r in mine)
    assert "wrong-sin-rule" in dom and "Comparison" in dom and "Error distribution" in dom
    # one entry per defect, with its case count, its shrunk case and its replay command
    defects = [r for r in map(json.loads, lines) if "defect" in r]
    for sig in {d["defect"] for d in defects}:
        smallest = min((d for d in defects if d["defect"] == sig), key=lambda d: d["size"])
        program = smallest["case"].split("---")[0]
        assert re.search(r"sin\(%", program) and program.splitlines()[0] in dom
        n = sum(r.get("signature") == sig for r in records)
        assert dom.count(f'data-signature="{sig}"') == 1 and f"{n} case(s)" in dom, sig
    assert "Defects: " in dom and "gradcert replay" in dom and "tests.mutants:WrongSinRule" in dom
    assert "<svg" in dom and "<rect" in dom
    # the verdict first, with its counts, before any table
    fails = sum(r["status"] == "fail" for r in records)
    verdict = re.search(r'id="verdict">(.*?)</p>', dom, re.S)
    assert verdict and dom.index('id="verdict"') < dom.index("<table"), dom[:2000]
    said = " ".join(verdict.group(1).split())
    assert said.startswith("FAILED: 1 new defect(s), 0 known;") and f"{fails} fail" in said, said


def test_screenshot_is_kept_as_an_artefact(report: Path) -> None:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / "report.png"
    shot.unlink(missing_ok=True)
    render(chromium(), report, "--window-size=1200,1800", f"--screenshot={shot}")
    assert shot.exists() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_is_self_contained(report: Path) -> None:
    html = report.read_text()
    assert not re.search(r"<(link|script)[^>]+(href|src)=", html)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)


def test_json_summary_and_junit_beside_it(report: Path) -> None:
    summary = json.loads(report.with_suffix(".json").read_text())
    assert summary["backends"]["reference"]["totals"].get("fail", 0) == 0
    assert summary["backends"]["wrong-sin-rule"]["totals"]["fail"] >= 1
    assert summary["failures"] and summary["failures"][0]["replay"].startswith("gradcert replay")
    root = ET.parse(report.with_suffix(".xml")).getroot()
    suites = {s.get("name"): s for s in root}
    assert int(suites["wrong-sin-rule.while"].get("failures", "0")) >= 1
    assert suites["reference.elementwise"].get("failures") == "0"


def test_report_of_a_missing_results_file_is_exit_2(tmp_path: Path) -> None:
    r = cli(tmp_path, "report", "nope.jsonl")
    assert r.returncode == 2 and r.stderr.strip() == "gradcert: error: nope.jsonl: no such results file"


def test_junit_holds_any_message_a_backend_gives(tmp_path: Path) -> None:
    """Markup, quotes, newlines and control characters in a backend's message or a case's text:
    the file parses, and a reader gets each back (control characters left out: XML 1.0 has none)."""
    from gradcert.reports.writers import write_junit

    base = {"backend": "b&<x>", "area": "elementwise", "test_id": "test_e.py::t", "timings": {"total": 0.5}}
    records = [
        {**base, "case_id": "c1", "status": "fail", "oracle": "fd", "message": 'got "1" <\x01> & \'2\'\n\tdone',
         "case": "%y = sin(%x)  # a < b & c\x1b\n---\nrest", "replay": "gradcert replay f.case"},
        {**base, "case_id": "c2", "status": "crash", "message": "SIGSEGV\r\n"},
        {**base, "case_id": "c3", "status": "unsupported", "message": "lacks while"},
        {**base, "case_id": "c4", "status": "pass", "message": ""},
    ]  # fmt: skip
    root = ET.parse(write_junit(records, tmp_path / "j.xml")).getroot()
    (suite,) = root
    assert suite.get("name") == "b&<x>.elementwise"
    assert [suite.get(k) for k in ("tests", "failures", "errors", "skipped")] == ["4", "1", "1", "1"]
    fail, crash, skipped, passed = suite
    assert fail.get("name") == "test_e.py::t[c1]" and fail.get("time") == "0.5000"
    (f,) = fail
    assert f.tag == "failure" and f.get("message") == "fd: got \"1\" <> & '2'\n\tdone"
    assert f.text == "%y = sin(%x)  # a < b & c\n\nreplay: gradcert replay f.case"
    assert [(e.tag, e.get("type"), e.get("message")) for e in crash] == [("error", "crash", "crash: SIGSEGV\r\n")]
    assert [(e.tag, e.get("message")) for e in skipped] == [("skipped", "unsupported: lacks while")]
    assert list(passed) == []


def test_a_report_is_written_where_the_template_cache_cannot_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled template is cached in the temporary folder; a folder that cannot hold it (here
    a file where the folder should be) costs the compile, not the report."""
    import tempfile

    from gradcert.reports import html

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))
    html._environment.cache_clear()
    try:
        assert html._environment().bytecode_cache is None
        cache = html._Cache(str(blocked))  # made, but every write fails
        html._environment().bytecode_cache = cache
        page = html.render([{"backend": "b", "area": "elementwise", "status": "pass", "test_id": "t", "case_id": "c"}])
    finally:
        html._environment.cache_clear()
    assert "<table" in page and "elementwise" in page


def test_the_report_holds_of_a_passed_case_only_what_it_shows(report: Path) -> None:
    """Read for the report, a case that did not fail is cut to the fields the report reads (an
    hour's fuzzing writes millions): the page, the summary and the JUnit XML are the same as from
    the records whole."""
    from gradcert.conformance.outcomes import latest
    from gradcert.conformance.results import read_records
    from gradcert.reports import html
    from gradcert.reports.summary import summary
    from gradcert.reports.writers import write_junit

    files = [report.parent / "ref.jsonl", report.parent / "mut.jsonl"]
    whole = latest(read_records(files))
    cut = latest(map(html._slimmer(), read_records(files)))
    assert {r["status"] for r in whole} >= {"pass", "fail"}
    assert all((len(c) < len(w)) == (w["status"] == "pass") for c, w in zip(cut, whole))  # (the failures: whole)
    day = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
    assert day.sub("", html.render(cut)) == day.sub("", html.render(whole))
    assert summary(cut) == summary(whole)
    xml = [write_junit(r, report.parent / f"{name}.xml").read_text() for name, r in (("cut", cut), ("whole", whole))]
    assert xml[0] == xml[1]
