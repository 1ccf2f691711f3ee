"""The JSON summary of a results file: counts by backend and area, defects, failures."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gradcert.conformance.outcomes import Loaded, defects, matrix
from gradcert.conformance.verdicts import FAILING, STATUSES, Status


def summary(records: list[dict[str, Any]], loaded: Loaded | None = None) -> dict[str, Any]:
    m = matrix(records)
    found = defects(loaded) if loaded is not None else []
    ending = loaded.ending if loaded is not None else None
    return {
        "statuses": list(STATUSES),
        "complete": ending is None or bool(ending.get("complete")),
        "run": ending,
        "backends": {
            b: {
                "version": next((r.get("backend_version", "") for r in records if r["backend"] == b), ""),
                "areas": {a: dict(c) for a, c in sorted(areas.items())},
                "totals": dict(sum(areas.values(), Counter())),
            }
            for b, areas in sorted(m.items())
        },
        "defects": [
            {
                "signature": d.signature,
                "backend": d.backend,
                "status": Status.KNOWN if d.known else d.status,
                "cases": d.cases,
                "tests": sorted(d.tests),
                "areas": sorted(d.areas),
                "replay": (d.example or {}).get("replay"),
                "case_file": (d.example or {}).get("case_file"),
                "known_case": d.known.case if d.known else None,
            }
            for d in found
        ],
        "failures": [
            {
                k: r.get(k)
                for k in (
                    "backend",
                    "area",
                    "test_id",
                    "case_id",
                    "dtype",
                    "status",
                    "oracle",
                    "message",
                    "replay",
                    "signature",
                )
            }
            for r in records
            if r["status"] in FAILING
        ],
    }
