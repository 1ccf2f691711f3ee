"""JSON summary and JUnit XML for CI dashboards, from the latest record of each case
(`summary.latest` of the results files' records)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from .summary import summary


def write_json(records: list[dict[str, Any]], out: str | Path) -> Path:
    p = Path(out)
    p.write_text(json.dumps(summary(records), indent=1, sort_keys=True) + "\n")
    return p


def write_junit(records: list[dict[str, Any]], out: str | Path) -> Path:
    """One <testsuite> per backend and area, one <testcase> per judged case.

    Written as text, not built as an ElementTree: a reference certify run's 8,500 cases took 73 ms
    as elements, 30 ms as text. Characters XML 1.0 cannot hold (control characters in a backend's
    error message) are left out: ElementTree wrote them, and no parser read the file back."""
    suites: dict[tuple[str, str], list[str]] = {}
    counts: dict[tuple[str, str], list[int]] = {}  # failures, errors, skipped
    names: dict[tuple[str, str], str] = {}  # "backend.area", quoted
    for r in records:
        key = (r["backend"], r["area"])
        if key not in suites:
            suites[key], counts[key], names[key] = [], [0, 0, 0], _attr(f"{key[0]}.{key[1]}")
        cases = suites[key]
        name = _attr(f"{r['test_id']}[{r['case_id']}]")
        seconds = r["seconds"] if "seconds" in r else r.get("timings", {}).get("total", 0.0)  # (cut, or whole)
        head = f'<testcase classname={names[key]} name={name} time="{seconds:.4f}"'
        status, message = r["status"], r.get("message", "")
        if status == "fail":
            counts[key][0] += 1
            said = _attr(f"{r.get('oracle', '')}: {message}"[:500])
            text = _text(f"{r.get('case', '').split('---')[0]}\nreplay: {r.get('replay', '')}")
            cases.append(f"{head}><failure message={said}>{text}</failure></testcase>")
        elif status in ("error", "crash", "timeout"):
            counts[key][1] += 1
            cases.append(f'{head}><error message={_attr(f"{status}: {message}"[:500])} type="{status}" /></testcase>')
        elif status in ("invalid", "unsupported"):
            counts[key][2] += 1
            cases.append(f"{head}><skipped message={_attr(f'{status}: {message}'[:500])} /></testcase>")
        else:
            cases.append(f"{head} />")
    parts = ["<?xml version='1.0' encoding='utf-8'?>\n", '<testsuites name="gradcert">']
    for key, cases in suites.items():
        failures, errors, skipped = counts[key]
        parts.append(
            f'<testsuite name={names[key]} tests="{len(cases)}" failures="{failures}" '
            f'errors="{errors}" skipped="{skipped}">'
        )
        parts += cases
        parts.append("</testsuite>")
    parts.append("</testsuites>\n")
    p = Path(out)
    p.write_text("".join(parts), encoding="utf-8")
    return p


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
