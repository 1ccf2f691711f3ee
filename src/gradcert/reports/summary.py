"""Counting verdicts: the backend x area matrix every report shows."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from ..conformance.api import FAILING, STATUSES


def latest(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (backend, test, case): the last written (a resumed run may repeat none)."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in records:
        out[(r.get("backend", ""), r.get("test_id", ""), r.get("case_id", ""))] = r
    return list(out.values())


def matrix(records: list[dict[str, Any]]) -> dict[str, dict[str, Counter[str]]]:
    """backend -> area -> status counts."""
    m: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for r in records:
        m[r["backend"]][r["area"]][r["status"]] += 1
    return m


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    m = matrix(records)
    return {
        "statuses": list(STATUSES),
        "backends": {
            b: {
                "version": next((r.get("backend_version", "") for r in records if r["backend"] == b), ""),
                "areas": {a: dict(c) for a, c in sorted(areas.items())},
                "totals": dict(sum(areas.values(), Counter())),
            }
            for b, areas in sorted(m.items())
        },
        "failures": [
            {
                k: r.get(k)
                for k in ("backend", "area", "test_id", "case_id", "status", "oracle", "message", "replay", "case_file")
            }
            for r in records
            if r["status"] in FAILING
        ],
    }
