"""What localizing failing cases costs, side by side on one machine: `gradcert certify` of one
backend by this tree (every failing case localized: `conformance/localize.py`) and by an earlier
tree (`--before REV`, a git revision: grouped by the area a failure was met in, each area's defect
shrunk), each with its own known defects, run one after the other. Prints each run's wall time,
verdicts and defects, then

- the ratio of wall times, this tree / the earlier one (target <= 1.25 for Paddle's certify profile);
- the backend calls localization spent per failing case (mean and 90th percentile);
- the share of failing cases localized to one op or one construct (not `unlocalized`), and how many
  distinct defects the run reports against the earlier tree's.

    python bench/localization.py [--backend paddle] [--profile certify] [--before 58b9412] [--areas A,B]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from scaling import run_certify

ROOT = Path(__file__).resolve().parents[1]
DEFECTIVE = {"fail", "known", "error", "crash", "timeout", "refused", "nondeterministic"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="paddle")
    ap.add_argument("--profile", default="certify")
    ap.add_argument("--before", default="58b9412", help="the earlier revision (before localization)")
    ap.add_argument("--areas", default="")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tree = Path(d) / "before"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(tree), args.before],
            check=True,
            capture_output=True,
        )
        try:
            runs = {}
            for name, src in (("before", tree / "src"), ("after", ROOT / "src")):
                os.environ["PYTHONPATH"] = str(src)  # (the child certify and its workers import that tree)
                (Path(d) / name).mkdir()
                runs[name] = run_certify(args.backend, args.profile, args.areas, args.workers, Path(d) / name)
                report(name, *runs[name], args)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    (before, _), (after, a) = runs["before"], runs["after"]
    failing = [r for r in a if r.get("case_id") and r["status"] in DEFECTIVE]
    probes = sorted(int(r.get("probes", 0)) for r in failing)
    localized = [r for r in failing if not str(r.get("signature", "")).startswith("unlocalized")]
    print(f"ratio certify time after / before: {after / before:.2f}")
    if probes:
        p90 = probes[int(0.9 * (len(probes) - 1))]
        print(f"backend calls per failing case: mean {statistics.mean(probes):.1f}, 90th percentile {p90}")
        print(
            f"failing cases localized to one op or construct: {len(localized)} of {len(failing)} "
            f"({100 * len(localized) / len(failing):.1f}%)"
        )


def report(name: str, wall: float, records: list[dict[str, Any]], args: Any) -> None:
    cases = {(r["test_id"], r.get("draw") or r["case_id"]): r for r in records if r.get("case_id")}
    statuses = collections.Counter(r["status"] for r in cases.values())
    sigs = collections.Counter(r["signature"] for r in cases.values() if r["status"] in DEFECTIVE)
    said = ", ".join(f"{n} {s}" for s, n in statuses.most_common())
    print(
        f"{name}: {args.backend}, {args.profile}, {args.workers} worker(s): {wall:.1f} s; {len(cases)} verdicts: "
        f"{said}; {len(sigs)} distinct defects",
        flush=True,
    )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
