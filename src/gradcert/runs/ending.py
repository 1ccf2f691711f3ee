"""How a run ends: the summary printed (areas x statuses, one block per defect, the known defects
no case showed), the known defects no case showed judged again, a night's findings indexed, the
exit status."""

from __future__ import annotations

import itertools
import json
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any

from gradcert.conformance.outcomes import load
from gradcert.conformance.results import ResultsFile, read_records
from gradcert.conformance.verdicts import DEFECTIVE, LIMIT, STATUSES, Status
from gradcert.runs.lifecycle import exit_for
from gradcert.runs.options import EXIT_FAIL, EXIT_OK, Render, RunOptions


def print_summary(loaded: Any, known: dict[str, Any], out: IO[str] = sys.stdout) -> list[Any]:
    """The areas x statuses table, then one block per defect (new first); returns the defects."""
    from gradcert.conformance.outcomes import defects, matrix, not_reproduced

    m = matrix(loaded.cases)
    shown = [s for s in STATUSES if any(c[s] for per in m.values() for c in per.values())]
    for backend, per in m.items():
        print(f"\n{backend}: cases by area", file=out)
        width = max([len(a) for a in per] + [4])
        print("  " + "area".ljust(width) + "".join(s.rjust(max(len(s), 5) + 2) for s in shown), file=out)
        for area, c in per.items():
            print("  " + area.ljust(width) + "".join(str(c[s]).rjust(max(len(s), 5) + 2) for s in shown), file=out)
    for backend, tally in loaded.coverage.items():
        print(f"\n{backend}: {tally.summary()}", file=out)
    limits = Counter(
        (r["backend"], r.get("message", "")) for r in loaded.cases if str(r.get("message", "")).startswith(LIMIT)
    )
    for (backend, why), n in sorted(limits.items()):
        print(f"\n{backend}: {n} case(s) beyond the adapter's limits (unsupported): {why[len(LIMIT) :]}", file=out)
    found = defects(loaded, known)
    for d in found:
        ex = d.example or {}
        head = "KNOWN" if d.known else ("NEW " + d.status.upper() if d.status != Status.FAIL else "NEW")
        dtype = ex.get("dtype", "f64")
        where = f"{d.cases} case(s) in {len(d.tests)} test(s) of {len(d.areas)} area(s): {', '.join(sorted(d.areas))}"
        print(f"\n{head} {d.backend}: {d.signature}  ({dtype}; {where})", file=out)
        if d.known:
            print(f"  known: {d.known.reason}\n  on file: {d.known.case}", file=out)
        else:
            print(f"  {str(ex.get('message', ''))[:300]}", file=out)
            if ex.get("case"):
                program = str(ex["case"]).split("---")[0].rstrip()
                print("  " + program.replace("\n", "\n  "), file=out)
        if ex.get("replay"):
            print(f"  replay: {ex['replay']}", file=out)
    from gradcert.conformance.outcomes import fixed

    backend = next(iter(known), "")
    unmet = not_reproduced(loaded, known)
    drawn_past = [k for k in unmet if fixed(loaded, k, backend) is False]
    for k in unmet:
        if k not in drawn_past:
            why = "its minimal case passes now" if fixed(loaded, k, backend) else "not judged again"
            print(f"\nNOT REPRODUCED (fixed?) {k.signature}: {why}\n  {k.reason}\n  on file: {k.case}", file=out)
    if drawn_past:
        print(
            f"\n{len(drawn_past)} known defect(s) no case of this run showed; each one's minimal case still fails:",
            file=out,
        )
        for k in drawn_past:
            print(f"  {k.signature}", file=out)
    return found


def confirm_unmet(
    spec: str, loaded: Any, known: dict[str, Any], results: Path, isolate: bool | None, timeout: float
) -> None:
    """Judge again the minimal case of each known defect that no case of the run showed, and
    record whether it still fails (then it was not drawn) or passes (fixed?), in the results file
    and in `loaded`."""
    from gradcert.conformance.areas import AREAS
    from gradcert.conformance.defects import known_folder
    from gradcert.conformance.outcomes import not_reproduced
    from gradcert.conformance.session import Session
    from gradcert.generators.case import load_case

    unmet = not_reproduced(loaded, known)
    if not unmet:
        return
    s = Session(spec, None, results.parent, isolate=isolate, timeout=timeout)
    f = ResultsFile(results)
    try:
        for k in unmet:
            v = s.judge(AREAS[k.area], load_case(known_folder() / k.case))
            rec = {"unmet": k.signature, "backend": s.name, "still_fails": v.status in DEFECTIVE}
            f.append(rec)
            loaded.unmet[(s.name, k.signature)] = rec
    finally:
        f.close()
        s.close()


def finish(
    opts: RunOptions,
    render: Render,
    results: Path,
    findings: Path,
    index: dict[str, str],
    known: dict[str, Any],
    offset: int,
    judged: int,
    signum: int | None,
    where: str,
) -> int:
    """The end of a night (its records from `offset` on): the summary, earlier nights' index of
    findings updated with the new defects, the report; the exit status."""
    night = load(itertools.islice(read_records([results]), offset, None))
    found = print_summary(night, known)
    new = [d for d in found if d.new and d.signature not in index]
    for d in new:
        if d.example is not None and d.example.get("case_file"):
            index[d.signature] = str(d.example["case_file"])
    changed = bool(new)
    for r in night.defects:  # the signatures a shrink settled into an indexed one are its too
        for sig in r.get("of", ()):
            if r["defect"] in index and sig not in index:
                index[sig], changed = index[r["defect"]], True
    if changed:
        findings.mkdir(parents=True, exist_ok=True)
        (findings / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    workers = {r["worker"] for r in night.cases if r.get("worker")}
    by = f" from {len(workers)} worker process(es)" if workers else ""
    print(
        f"\nfuzz {opts.backend}{' ' + where if where else ''}: {judged} cases{by}; {len(new)} new defect(s); "
        f"results: {results}; findings: {findings}"
    )
    if opts.report:
        print(f"report: {render([results], opts.report, None)}")
    if night.incomplete:
        print(f"INCOMPLETE ({(night.ending or {}).get('signal')}): run the same command again to resume")
        return exit_for(signum)
    return EXIT_FAIL if new else EXIT_OK


def findings_index(findings: Path) -> dict[str, str]:
    """Earlier nights' defects: signature -> minimal case file."""
    p = findings / "index.json"
    return json.loads(p.read_text()) if p.exists() else {}
