"""A self-contained HTML report (inline CSS, no network) rendered from results files."""

from __future__ import annotations

import functools
import html
import math
import platform
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import BytecodeCache, Environment, FileSystemBytecodeCache, PackageLoader, select_autoescape
from jinja2.bccache import Bucket

from gradcert.conformance.areas import AREAS
from gradcert.conformance.outcomes import Comparison, Loaded, compare, defects, fixed, load, matrix, not_reproduced
from gradcert.conformance.results import read_records
from gradcert.conformance.verdicts import FAILING, STATUSES, Status
from gradcert.reference import collector

if TYPE_CHECKING:
    from gradcert.generators.coverage import Tally


def render(
    records: list[dict[str, Any]],
    title: str = "gradcert conformance report",
    loaded: Loaded | None = None,
    comparison: Comparison | None = None,
) -> str:
    """The page, from the latest record of each case (`summary.latest`), the defects found
    (`summary.defects`), how the run ended, and a comparison with a baseline run."""
    m = matrix(records)
    areas = [a for a in AREAS if any(a in per for per in m.values())]
    loaded = loaded if loaded is not None else Loaded(records, [], [])
    known = _known(m)
    found = defects(loaded, known)
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "platform": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
        "profiles": sorted({str(r.get("profile")) for r in records}),
        "seeds": sorted({str(r.get("seed")) for r in records}),
        "versions": {b: next((r.get("backend_version") for r in records if r["backend"] == b), "") for b in m},
    }
    template = _environment().get_template("report.html.j2")
    return template.render(
        title=title,
        matrix=m,
        areas=areas,
        area_titles={a: AREAS[a].title for a in AREAS},
        statuses=STATUSES,
        defects=found,
        gone=[(k, b, fixed(loaded, k, b)) for b in known for k in not_reproduced(loaded, {b: known[b]})],
        ending=loaded.ending,
        comparison=comparison,
        meta=meta,
        total=len(records),
        counts=Counter(r["status"] for r in records),
        dtypes={b: _dtypes(records, b) for b in m},
        escape=html.escape,
        plot=error_plot(records),
        coverage={b: coverage_grid(t) for b, t in loaded.coverage.items()},
        coverage_line={b: t.summary().partition(": ")[2] for b, t in loaded.coverage.items()},
    )


def _dtypes(records: list[dict[str, Any]], backend: str) -> str:
    """ "f64 900 · f32 100": a backend's cases by the precision their programs compute in."""
    n = Counter(str(r.get("dtype", "f64")) for r in records if r["backend"] == backend)
    return " · ".join(f"{d} {n[d]}" for d in sorted(n, reverse=True))


def _known(m: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The known defects of each backend in the records (a file that cannot be read: none)."""
    from gradcert.conformance.defects import KnownDefectsError, known_defects

    out = {}
    for b in m:
        try:
            out[b] = known_defects(b)
        except KnownDefectsError:
            out[b] = {}
    return out


@functools.cache
def _environment() -> Environment:
    """Jinja's, with the compiled template cached on disk (jinja's own cache, in the system's
    temporary folder, per user): compiling the template is most of a small report's time. A cache
    that cannot be made or written is done without."""
    try:
        # (named by how the environment compiles: a template compiled without escaping must not be
        # loaded by an environment that escapes, and jinja keys its cache by the source alone)
        cache: BytecodeCache | None = _Cache(pattern="__gradcert_report_escaped_%s.cache")
    except (OSError, RuntimeError):  # (no safe temporary folder of this user's)
        cache = None
    return Environment(
        loader=PackageLoader("gradcert.reports", "templates"),
        autoescape=select_autoescape(["html.j2"]),  # (every value the page shows is escaped: messages hold < and >)
        bytecode_cache=cache,
    )


class _Cache(FileSystemBytecodeCache):
    """Jinja's cache of files, where a file that cannot be read or written is one not cached."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            pass

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:  # (a full or read-only disk: the next report compiles the template again)
            pass


def error_plot(records: list[dict[str, Any]], width: int = 640, height: int = 220) -> str:
    """An inline SVG histogram of log10(relative error) of each judged gradient, per backend."""
    by: dict[str, list[float]] = {}
    for r in records:
        if r.get("oracle") in ("finite_differences", "reference") and r["status"] in (Status.PASS, Status.FAIL):
            rel = float(r.get("max_rel") or 0.0)
            by.setdefault(r["backend"], []).append(math.log10(min(max(rel, 1e-18), 1.0)))
    if not by:
        return ""
    lo, hi, nbins = -18.0, 0.0, 36
    colours = ["#3a7bd5", "#d5553a", "#2a9d5b", "#a03ad5", "#d5b23a"]
    counts = {b: [0] * nbins for b in by}
    for b, xs in by.items():
        for x in xs:
            counts[b][min(nbins - 1, max(0, int((x - lo) / (hi - lo) * nbins)))] += 1
    top = max(max(c) for c in counts.values()) or 1
    left, bottom, plot_w, plot_h = 40, 30, width - 50, height - 50
    bw = plot_w / nbins / len(by)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="errors" '
        f'role="img" aria-label="distribution of relative errors">',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#444"/>',
    ]
    for i, b in enumerate(sorted(by)):
        colour = colours[i % len(colours)]
        for k, n in enumerate(counts[b]):
            if n:
                h = plot_h * n / top
                x = left + k * plot_w / nbins + i * bw
                parts.append(
                    f'<rect x="{x:.1f}" y="{height - bottom - h:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                    f'fill="{colour}"><title>{html.escape(b)}: {n} cases near 1e{lo + k * (hi - lo) / nbins:.1f}'
                    "</title></rect>"
                )
        parts.append(
            f'<text x="{width - 170}" y="{20 + 14 * i}" font-size="12" fill="{colour}">'
            f"{html.escape(b)} ({len(by[b])} cases)</text>"
        )
    for e in range(int(lo), int(hi) + 1, 3):
        x = left + (e - lo) / (hi - lo) * plot_w
        parts.append(f'<text x="{x:.1f}" y="{height - 10}" font-size="11" text-anchor="middle">1e{e}</text>')
    parts.append("</svg>")
    return "".join(parts)


def coverage_grid(tally: Tally) -> str:
    """The coverage pairs as a triangle of squares, one per pair of cells: green as often as the
    run's cases hit it (darker: more), red where a reachable pair was never hit, grey where none
    can be (`coverage.UNREACHABLE`, its reason in the square's title)."""
    from gradcert.generators.coverage import CELLS, DIMENSIONS, REACHABLE, unreachable_pairs

    never = unreachable_pairs()
    top = max(tally.pairs.values(), default=1)
    cols = CELLS[len(DIMENSIONS["op"]) :]  # (no kind pairs with a kind: the columns start past them)
    rows = ['<table class="coverage"><tr><th></th>']
    rows += [f'<th class="v"><span>{html.escape(c)}</span></th>' for c in cols]
    rows.append("</tr>")
    for i, a in enumerate(CELLS[:-1]):
        rows.append(f"<tr><th>{html.escape(a)}</th>")
        for b in cols:
            pair = (a, b) if a < b else (b, a)
            if CELLS.index(b) <= i or pair not in REACHABLE and pair not in never:
                rows.append("<td></td>")  # (a cell with itself, or two of one dimension)
            elif pair in never:
                rows.append(f'<td class="u" title="{html.escape(f"{a} & {b}: unreachable: {never[pair]}")}"></td>')
            else:
                n = tally.pairs.get(pair, 0)
                shade = "m" if not n else f"h{min(4, 1 + int(4 * math.log1p(n) / math.log1p(top)))}"
                rows.append(f'<td class="{shade}" title="{html.escape(f"{a} & {b}: {n} case(s)")}"></td>')
        rows.append("</tr>")
    rows.append("</table>")
    return "".join(rows)


def write(paths: list[str | Path], out: str | Path, baseline: str | Path | None = None) -> Path:
    """The HTML report at `out`, with its JSON summary (.json) and JUnit XML (.xml) beside it;
    compared with the `baseline` results file where one is given."""
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    # (the collector walked the records read so far again and again: records are plain dicts and
    # lists, freed by their reference counts once written: before the collector is on again, or
    # its first collection would walk them all once more)
    with collector.paused():
        _write(paths, p, baseline)
    return p


def _write(paths: list[str | Path], p: Path, baseline: str | Path | None) -> None:
    from gradcert.reports.writers import write_json, write_junit

    # read once for all three (reading dominates a report's time); what the report does not need of a case
    # that passed is dropped as it is read (an hour's fuzzing is millions of cases)
    loaded = load(map(_slimmer(), read_records(paths)))
    comparison = compare(load(read_records([baseline])), loaded) if baseline else None
    records = loaded.cases
    p.write_text(render(records, loaded=loaded, comparison=comparison))
    write_json(records, p.with_suffix(".json"), loaded)
    write_junit(records, p.with_suffix(".xml"))


# what the report reads of a case that did not fail (a failure's record is kept whole: its text,
# its gradients, its replay command); those but the case's own id and message repeat from case to
# case, and are held once
_KEPT = ("test_id", "area", "backend", "backend_version", "profile", "seed", "dtype", "status", "oracle", "signature")


def _slimmer() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A function that cuts a record to what the report needs of it: 0.6 kB held a case that did
    not fail, not 3.1 (bench/memory.py); its repeated strings shared, not one copy a record."""
    shared: dict[Any, Any] = {}

    def slim(r: dict[str, Any]) -> dict[str, Any]:
        if r.get("status") in FAILING or "case_id" not in r:
            return r
        out = {k: shared.setdefault(r[k], r[k]) for k in _KEPT if k in r}
        out["case_id"], out["message"] = r.get("case_id", ""), r.get("message", "")
        if r.get("max_rel"):
            out["max_rel"] = r["max_rel"]
        out["seconds"] = r.get("timings", {}).get("total", 0.0)  # (the JUnit XML's time)
        return out

    return slim
