"""Memory held per verdict where a long run gathers them, beside what holding each verdict's record
would cost (what both held until they kept only what they use: 1.6 kB a verdict in a session,
3.2 kB a record read back). An hour's fuzzing on the reference is ~2 million verdicts a worker.

- a session: every verdict it gave (a case met again is not judged again) and those on record
  from an earlier run (resumed): bytes held per verdict over `--checks` of certify's reference
  checks (after as many untimed), against the same verdicts' records held whole;
- the report: the latest record of each case, as the report holds it (a case that did not fail
  cut to the fields it reads), against the records held whole.

Measured with tracemalloc (what Python allocates and keeps), each after a full collection.
Ratios last (target: <= 0.25 for both).

    python bench/memory.py [--checks 4000]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradcert.conformance.judging import draw_and_check
from gradcert.conformance.outcomes import latest
from gradcert.conformance.results import read_records
from gradcert.conformance.session import Session
from gradcert.reports.html import _slimmer
from scaling import certify_tests


def held(make: Callable[[], Any]) -> tuple[Any, int]:
    """What `make` returns, and the bytes it holds once made (allocated and still live)."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    out = make()
    gc.collect()
    return out, tracemalloc.get_traced_memory()[0] - before


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checks", type=int, default=4000)
    args = ap.parse_args()
    n = args.checks
    chosen = certify_tests("reference")
    with tempfile.TemporaryDirectory() as d:
        results = Path(d) / "r.jsonl"
        s = Session("reference", results, Path(d) / "f", isolate=False)

        def checks(start: int) -> None:
            for k in range(start, start + n):
                test_id, area, features = chosen[k % len(chosen)]
                draw_and_check(s, test_id, area, features, 1, k)

        checks(10**6)  # (the caches of kernels, signatures and interned strings: filled, not counted)
        tracemalloc.start()
        _, session = held(lambda: checks(0))
        s.close()
        tracemalloc.stop()
        tracemalloc.start()
        records, whole = held(lambda: list(read_records([results])))
        resumed, on_record = held(lambda: Session("reference", results, Path(d) / "f2", isolate=False))
        del records, resumed
        slim, report = held(lambda: latest(map(_slimmer(), read_records([results]))))
        tracemalloc.stop()
        count = len(slim)
    per_record = whole / count
    print(f"a record read back and held whole: {per_record:.0f} B ({count} records)")
    print(f"a session: {session / n:.0f} B held per verdict given ({n} checks)")
    print(f"a session resumed: {on_record / count:.0f} B held per verdict on record")
    print(f"the report: {report / count:.0f} B held per case")
    print(f"ratio held per verdict / record held whole, a session: {session / n / per_record:.2f} (target <= 0.25)")
    print(f"ratio held per case / record held whole, the report: {report / count / per_record:.2f} (target <= 0.25)")


if __name__ == "__main__":
    main()
