"""Parallel scaling: `gradcert certify` throughput (verdicts per second) with 1 and with 2 worker
processes (pytest-xdist), the same derandomised cases each time. Runs alternate (1, 2, 1, 2, ...)
so that machine noise hits both alike; the best run of each counts, after one untimed run per
backend. Two throughputs: end to end (wall time of the command) and steady (from the first
verdict to the last: the fixed costs of starting the workers and of rendering the report left out,
and printed apart). Ratios last (target: >= 1.8 with 2 workers on 2 cores).

Certify runs as on a default Python, which caches compiled modules: where the environment says
PYTHONDONTWRITEBYTECODE (this project's machines do), every process compiled gradcert's modules
from source again (~0.1 s a process, on the critical path once for one worker and twice for two:
the controller's, then the workers'); the untimed run writes the cache.

    python bench/scaling.py [--backends reference,paddle] [--profile certify] [--areas A,B] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run_certify(
    backend: str, profile: str, areas: str, workers: int, folder: Path, *extra: str
) -> tuple[float, list[dict[str, Any]]]:
    """Wall time and the verdict records of one `gradcert certify` run, results under `folder`."""
    results = folder / "r.jsonl"
    cmd = [sys.executable, "-m", "gradcert.cli", "certify", "--backend", backend, "--profile", profile]
    cmd += ["--workers", str(workers), "--results", str(results), "--report", str(folder / "r.html")]
    cmd += ["--findings", str(folder / "f"), *(["--areas", areas] if areas else []), *extra]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # (see above)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if r.returncode not in (0, 1):
        sys.exit(f"certify failed ({r.returncode}): {r.stderr[-2000:]}")
    return dt, [json.loads(line) for line in results.read_text().splitlines()]


def certify(backend: str, profile: str, areas: str, workers: int) -> tuple[float, float, int]:
    """Wall time, first-to-last verdict time and number of verdicts of one certify run."""
    with tempfile.TemporaryDirectory() as d:
        dt, records = run_certify(backend, profile, areas, workers, Path(d))
        stamps = [r["time"] for r in records]
        return dt, max(stamps) - min(stamps), len(stamps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="reference,paddle")
    ap.add_argument("--profile", default="certify")
    ap.add_argument("--areas", default="")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    ratios = []
    for backend in args.backends.split(","):
        # untimed: the first run of a framework reads it from disk (Paddle's 195 MB: 30 s cold)
        certify(backend, "quick", "elementwise", 2)
        best: dict[tuple[str, int], float] = {}
        for _ in range(args.repeat):
            for workers in (1, 2):
                wall, steady, n = certify(backend, args.profile, args.areas, workers)
                for kind, dt in (("end to end", wall), ("steady", steady)):
                    best[kind, workers] = max(best.get((kind, workers), 0.0), n / dt)
                print(
                    f"{backend}, {workers} worker(s): {n} verdicts, {wall:.1f} s wall ({n / wall:.1f}/s), first to "
                    f"last verdict {steady:.1f} s ({n / steady:.1f}/s), fixed costs {wall - steady:.1f} s",
                    flush=True,
                )
        ratios += [(backend, kind, best[kind, 2] / best[kind, 1]) for kind in ("end to end", "steady")]
    for backend, kind, r in ratios:
        print(f"ratio throughput 2 workers / 1 worker, {kind} ({backend}, {args.profile}): {r:.2f} (target >= 1.8)")


if __name__ == "__main__":
    main()
