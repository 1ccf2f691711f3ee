"""JSON summary and JUnit XML for CI dashboards, from the latest record of each case
(`summary.latest` of the results files' records)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from .summary import summary


def write_json(records: list[dict[str, Any]], out: str | Path) -> Path:
    p = Path(out)
    p.write_text(json.dumps(summary(records), indent=1, sort_keys=True) + "\n")
    return p


def write_junit(records: list[dict[str, Any]], out: str | Path) -> Path:
    """One <testsuite> per backend and area, one <testcase> per judged case."""
    root = ET.Element("testsuites", name="gradcert")
    suites: dict[tuple[str, str], ET.Element] = {}
    for r in records:
        key = (r["backend"], r["area"])
        if key not in suites:
            suites[key] = ET.SubElement(root, "testsuite", name=f"{key[0]}.{key[1]}")
        tc = ET.SubElement(
            suites[key],
            "testcase",
            classname=f"{key[0]}.{key[1]}",
            name=f"{r['test_id']}[{r['case_id']}]",
            time=f"{r.get('timings', {}).get('total', 0.0):.4f}",
        )
        status = r["status"]
        if status == "fail":
            f = ET.SubElement(tc, "failure", message=f"{r.get('oracle', '')}: {r.get('message', '')}"[:500])
            f.text = f"{r.get('case', '').split('---')[0]}\nreplay: {r.get('replay', '')}"
        elif status in ("error", "crash", "timeout"):
            ET.SubElement(tc, "error", message=f"{status}: {r.get('message', '')}"[:500], type=status)
        elif status in ("invalid", "unsupported"):
            ET.SubElement(tc, "skipped", message=f"{status}: {r.get('message', '')}"[:500])
    for s in suites.values():
        cases = list(s)
        s.set("tests", str(len(cases)))
        s.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        s.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
        s.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    p = Path(out)
    ET.ElementTree(root).write(p, encoding="utf-8", xml_declaration=True)
    return p
