"""`gradcert replay`: judge saved cases, or drawn ones by their names in a report, again."""

from __future__ import annotations

import os
import re

from gradcert.conformance.areas import AREAS
from gradcert.conformance.verdicts import DEFECTIVE, Status
from gradcert.generators.case import Case, load_case
from gradcert.runs.check import area_of
from gradcert.runs.options import EXIT_FAIL, EXIT_OK, RunOptions, session

# `TEST[DRAW]`: how the reports name a case the seeded search drew (its record holds the draw)
_DRAWN = re.compile(r"(test_\w+\.py::\w+)\[(seed:[0-9a-f]+|simplest)\]")


def replay(opts: RunOptions) -> int:
    """Judge the cases `opts.files` names again: exit 1 if any fails, a known defect included (the
    case still fails)."""
    cases: list[tuple[str, Case]] = []
    for name in opts.files:
        drawn = _DRAWN.fullmatch(name)
        if drawn and not os.path.exists(name):  # a case on record by its draw, as reports name it
            from gradcert.backends.registry import resolve
            from gradcert.conformance.judging import redraw

            cases.append((name, redraw(drawn[1], drawn[2], resolve(opts.backend).capabilities)))
        else:
            cases.append((name, load_case(name)))
    s = session(opts)
    failed = False
    try:
        for name, case in cases:
            area = AREAS[case.area] if case.area in AREAS else area_of(case)  # (`check`'s own cases)
            v = s.judge(area, case)
            if len(cases) > 1:
                print(f"== {name}")
            print(case.to_text().split("---")[0], end="")
            said = f"verdict: {v.status}" + (f" ({v.oracle})" if v.oracle else "")
            print(said + (f": {v.message}" if v.message else ""))
            if v.kind:
                print(f"signature: {v.signature}")
            if v.status == Status.KNOWN:
                k = s.known[v.signature]
                print(f"known defect: {k.reason} ({k.case})")
            failed = failed or v.status in DEFECTIVE
    finally:
        s.close()
    return EXIT_FAIL if failed else EXIT_OK
