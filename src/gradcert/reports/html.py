"""A self-contained HTML report (inline CSS, no network) rendered from results files."""

from __future__ import annotations

import html
import platform
import time
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from ..conformance.api import STATUSES
from ..conformance.areas import AREAS
from ..conformance.results import read_records
from .summary import latest, matrix


def render(paths: list[str | Path], title: str = "gradcert conformance report") -> str:
    records = latest(read_records(paths))
    env = Environment(loader=PackageLoader("gradcert.reports", "templates"), autoescape=select_autoescape())
    m = matrix(records)
    areas = [a for a in AREAS if any(a in per for per in m.values())]
    failures = [r for r in records if r["status"] in ("fail", "error", "crash", "timeout")]
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "platform": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
        "profiles": sorted({str(r.get("profile")) for r in records}),
        "seeds": sorted({str(r.get("seed")) for r in records}),
        "versions": {b: next((r.get("backend_version") for r in records if r["backend"] == b), "") for b in m},
    }
    return env.get_template("report.html.j2").render(
        title=title,
        matrix=m,
        areas=areas,
        area_titles={a: AREAS[a].title for a in AREAS},
        statuses=STATUSES,
        failures=failures,
        meta=meta,
        total=len(records),
        escape=html.escape,
    )


def write(paths: list[str | Path], out: str | Path) -> Path:
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render(paths))
    return p
