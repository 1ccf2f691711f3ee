"""Parallel scaling: `gradcert certify` throughput (verdicts per second of wall time) with 1 and
with 2 worker processes (pytest-xdist), the same derandomised cases each time. Runs alternate
(1, 2, 1, 2, ...) so that machine noise hits both alike; the best run of each counts. Ratio last
(target: >= 1.8 with 2 workers on 2 cores).

    python bench/scaling.py [--backend reference] [--profile certify] [--areas A,B] [--repeat 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def certify(backend: str, profile: str, areas: str, workers: int) -> tuple[float, int]:
    """Wall time and number of verdicts of one certify run."""
    with tempfile.TemporaryDirectory() as d:
        results = Path(d) / "r.jsonl"
        cmd = [sys.executable, "-m", "gradcert.cli", "certify", "--backend", backend, "--profile", profile]
        cmd += ["--workers", str(workers), "--results", str(results), "--report", str(Path(d) / "r.html")]
        cmd += ["--findings", str(Path(d) / "f")] + (["--areas", areas] if areas else [])
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        dt = time.perf_counter() - t
        if r.returncode not in (0, 1):
            sys.exit(f"certify failed ({r.returncode}): {r.stderr[-2000:]}")
        return dt, len(results.read_text().splitlines())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="reference")
    ap.add_argument("--profile", default="certify")
    ap.add_argument("--areas", default="")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    best: dict[int, float] = {}
    for _ in range(args.repeat):
        for workers in (1, 2):
            dt, n = certify(args.backend, args.profile, args.areas, workers)
            rate = n / dt
            best[workers] = max(best.get(workers, 0.0), rate)
            print(f"{workers} worker(s): {n} verdicts in {dt:.1f} s = {rate:.1f} verdicts/s", flush=True)
    print(
        f"ratio throughput 2 workers / 1 worker ({args.backend}, {args.profile}): "
        f"{best[2] / best[1]:.2f} (target >= 1.8)"
    )


if __name__ == "__main__":
    main()
