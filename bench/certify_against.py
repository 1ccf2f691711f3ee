"""A backend's certify time against an earlier revision's, measured side by side.

`gradcert certify --backend B --profile P --workers 2` of this tree and of REV (a git revision,
checked out into a temporary worktree and run from it, with its own known defects), alternating,
N times each; prints each wall time, the medians and their ratio (this tree / REV). Then, from this
tree's last run, what localizing its failing cases cost (`conformance/localize.py`): the backend
calls spent per failing case (mean, 90th percentile) and the share of failing cases localized to
one op or one construct, and the distinct defects each tree reported.

Targets: the generator coverage work, at most 1.5 for the reference against the revision before
it; localization (`--backend paddle --against 58b9412`, the revision before it), at most 1.25.

    python bench/certify_against.py --against REV [--backend reference] [--repeat 3] [--profile certify]
                                    [--areas A,B] [--no-shrink]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFECTIVE = {"fail", "known", "error", "crash", "timeout", "refused", "nondeterministic"}


def certify(src: Path, args: Any, work: Path) -> tuple[float, list[dict[str, Any]]]:
    """Seconds of one certify run of the package under `src`, in a fresh folder under `work`, and
    its records."""
    out = Path(tempfile.mkdtemp(dir=work))
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{src.parent}")  # (a tree's tests.mutants too)
    code = "import sys; from gradcert.cli import main; sys.exit(main())"
    argv = ["certify", "--backend", args.backend, "--profile", args.profile, "--workers", str(args.workers)]
    argv += ["--results", "r.jsonl", *(["--areas", args.areas] if args.areas else [])]
    argv += ["--no-shrink"] if args.no_shrink else []
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, *argv], cwd=out, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    if r.returncode not in (0, 1):
        raise SystemExit(f"certify from {src} failed ({r.returncode}): {r.stdout[-1000:]}{r.stderr[-1000:]}")
    records = [json.loads(x) for x in (out / "r.jsonl").read_text().splitlines() if x.endswith("}")]
    print(f"  {src.parent.name}: exit {r.returncode}, {summary(records)}", flush=True)
    return took, records


def summary(records: list[dict[str, Any]]) -> str:
    cases = [r for r in records if r.get("case_id") and "defect" not in r]
    statuses: dict[str, int] = {}
    for r in cases:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    defects = {r["signature"] for r in cases if r["status"] in DEFECTIVE and r.get("signature")}
    said = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items(), key=lambda kv: -kv[1]))
    return f"{len(cases)} verdicts ({said}), {len(defects)} distinct defects"


def localization(records: list[dict[str, Any]]) -> None:
    failing = [r for r in records if r.get("case_id") and "defect" not in r and r["status"] in DEFECTIVE]
    if not failing or "probes" not in failing[0]:
        return
    probes = sorted(int(r.get("probes", 0)) for r in failing)
    localized = [r for r in failing if not str(r.get("signature", "")).startswith("unlocalized")]
    p90 = probes[int(0.9 * (len(probes) - 1))]
    print(f"backend calls per failing case: mean {statistics.mean(probes):.1f}, 90th percentile {p90}")
    share = 100 * len(localized) / len(failing)
    print(f"failing cases localized to one op or construct: {len(localized)} of {len(failing)} ({share:.1f}%)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", required=True, help="a git revision")
    ap.add_argument("--backend", default="reference")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", default="certify")
    ap.add_argument("--areas", default="")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-shrink", action="store_true", help="new defects reported unshrunk, on both sides")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.against],
            check=True,
            capture_output=True,
        )
        try:
            now_s, old_s = [], []
            for k in range(args.repeat):
                old_s.append(certify(old / "src", args, Path(tmp))[0])
                took, records = certify(ROOT / "src", args, Path(tmp))
                now_s.append(took)
                print(f"run {k + 1}: {args.against} {old_s[-1]:.2f} s, this tree {now_s[-1]:.2f} s", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    a, b = statistics.median(now_s), statistics.median(old_s)
    print(f"median: {args.against} {b:.2f} s, this tree {a:.2f} s ({args.backend}, {args.profile})")
    print(f"ratio this tree / {args.against}: {a / b:.2f}")
    localization(records)


if __name__ == "__main__":
    main()
