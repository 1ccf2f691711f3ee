"""The reference's certify time against an earlier revision's, measured side by side.

`gradcert certify --backend reference --profile certify --workers 2` of this tree and of REV (a
git revision, checked out into a temporary worktree and run from it), alternating, N times each;
prints each wall time, the medians and their ratio (this tree / REV). Target of the generator
coverage work: at most 1.5 against the revision before it.

    python bench/certify_against.py --against REV [--repeat 3] [--profile certify]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def certify(src: Path, profile: str, work: Path) -> float:
    """Seconds of one certify run of the package under `src`, in a fresh folder under `work`."""
    out = Path(tempfile.mkdtemp(dir=work))
    env = dict(os.environ, PYTHONPATH=str(src))
    code = "import sys; from gradcert.cli import main; sys.exit(main())"
    argv = ["certify", "--backend", "reference", "--profile", profile, "--workers", "2"]
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, *argv], cwd=out, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"certify from {src} failed ({r.returncode}): {r.stdout[-1000:]}{r.stderr[-1000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", required=True, help="a git revision")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", default="certify")
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
                old_s.append(certify(old / "src", args.profile, Path(tmp)))
                now_s.append(certify(ROOT / "src", args.profile, Path(tmp)))
                print(f"run {k + 1}: {args.against} {old_s[-1]:.2f} s, this tree {now_s[-1]:.2f} s")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    a, b = statistics.median(now_s), statistics.median(old_s)
    print(f"median: {args.against} {b:.2f} s, this tree {a:.2f} s")
    print(f"ratio this tree / {args.against}: {a / b:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
