"""JSON summary and JUnit XML for CI dashboards, from the latest record of each case
(`summary.latest` of the results files' records)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from gradcert.conformance.outcomes import Loaded
from gradcert.conformance.verdicts import Status
from gradcert.reports.summary import summary


def write_json(records: list[dict[str, Any]], out: str | Path, loaded: Loaded | None = None) -> Path:
    p = Path(out)
    p.write_text(json.dumps(summary(records, loaded), indent=1, sort_keys=True) + "\n")
    return p


def write_junit(records: list[dict[str, Any]], out: str | Path) -> Path:
    """One <testsuite> per backend and area (in the order they first come), one <testcase> per
    judged case (in the records' order).

    Written as text, not built as an ElementTree, which is slower by more than half for a certify
    run's thousands of cases. Characters XML 1.0 cannot hold (control characters in a backend's
    error message) are left out: ElementTree wrote them, and no parser read the file back. Counted
    first, then written case by case: a night's fuzzing is millions of cases, and the file's text
    held whole would be a large part of a report's memory."""
    counts: dict[tuple[str, str], list[int]] = {}  # tests, failures, errors, skipped
    for r in records:
        key = (r["backend"], r["area"])
        c = counts.get(key)
        if c is None:
            c = counts[key] = [0, 0, 0, 0]
        c[0] += 1
        kind = _KINDS.get(r["status"])
        if kind is not None:
            c[kind] += 1
    order = {key: n for n, key in enumerate(counts)}
    p = Path(out)
    with open(p, "w", encoding="utf-8") as f:
        f.write("<?xml version='1.0' encoding='utf-8'?>\n<testsuites name=\"gradcert\">")
        suite: tuple[str, str] | None = None
        classname = ""
        for r in sorted(records, key=lambda r: order[r["backend"], r["area"]]):  # (stable: the records' order within)
            key = (r["backend"], r["area"])
            if key != suite:
                if suite is not None:
                    f.write("</testsuite>")
                suite, classname = key, _attr(f"{key[0]}.{key[1]}")
                tests, failures, errors, skipped = counts[key]
                f.write(
                    f'<testsuite name={classname} tests="{tests}" failures="{failures}" errors="{errors}" '
                    f'skipped="{skipped}">'
                )
            f.write(_testcase(r, classname))
        if suite is not None:
            f.write("</testsuite>")
        f.write("</testsuites>\n")
    return p


# a status's element, as its place in a suite's counts: 1 <failure>, 2 <error>, 3 <skipped>
_KINDS = {
    Status.FAIL: 1,
    Status.REFUSED: 1,
    Status.NONDETERMINISTIC: 1,
    Status.ERROR: 2,
    Status.CRASH: 2,
    Status.TIMEOUT: 2,
    Status.INVALID: 3,
    Status.UNSUPPORTED: 3,
    Status.KNOWN: 3,
}


def _testcase(r: dict[str, Any], classname: str) -> str:
    name = _attr(f"{r['test_id']}[{r['case_id']}]")
    seconds = r["seconds"] if "seconds" in r else r.get("timings", {}).get("total", 0.0)  # (cut, or whole)
    head = f'<testcase classname={classname} name={name} time="{seconds:.4f}"'
    status, message, kind = r["status"], r.get("message", ""), _KINDS.get(r["status"])
    if kind == 1:
        said = _attr(f"{r.get('oracle', '')}: {message}"[:500])
        text = _text(f"{r.get('case', '').split('---')[0]}\nreplay: {r.get('replay', '')}")
        return f"{head}><failure message={said}>{text}</failure></testcase>"
    if kind == 2:
        return f'{head}><error message={_attr(f"{status}: {message}"[:500])} type="{status}" /></testcase>'
    if kind == 3:
        return f"{head}><skipped message={_attr(f'{status}: {message}'[:500])} /></testcase>"
    return f"{head} />"


# what XML 1.0 cannot hold: control characters but tab, newline and carriage return
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_PLAIN = re.compile('[^<>&"\x00-\x1f\ufffe\uffff]*')  # (most names and messages: written as they are)


def _text(s: str) -> str:
    return escape(_NOT_XML.sub("", s))


def _attr(s: str) -> str:
    """A quoted attribute value (newlines and tabs kept as references, as a parser reads them back)."""
    if _PLAIN.fullmatch(s):
        return f'"{s}"'
    return quoteattr(_NOT_XML.sub("", s), {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})
