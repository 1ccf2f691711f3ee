"""Parallel scaling: `gradcert certify` throughput (verdicts per second) with 1 and with 2 worker
processes (pytest-xdist), the same derandomised cases each time. Runs alternate (1, 2, 1, 2, ...)
so that machine noise hits both alike; the best run of each counts, after one untimed run per
backend. Two throughputs: end to end (wall time of the command) and steady (from the first
verdict to the last: the fixed costs of starting the workers and of rendering the report left out,
and printed apart). Ratios last (target: >= 1.8 with 2 workers on 2 cores).

The machine's own ceiling is measured beside them (`--ceiling N`): N of certify's reference checks
in one process, against N/2 in each of two processes at once (drawn and judged as the search does,
no pytest, no xdist, the loops alone timed, both started together): what two cores of this machine
give this work before any orchestration (shared caches and memory, the other tenants of the
host), measured after each pair of the first backend's certify runs, best of each.

Certify runs as on a default Python, which caches compiled modules: where the environment says
PYTHONDONTWRITEBYTECODE (this project's machines do), every process compiled gradcert's modules
from source again (~0.1 s a process, on the critical path once for one worker and twice for two:
the controller's, then the workers'); the untimed run writes the cache.

    python bench/scaling.py [--backends reference,paddle] [--profile certify] [--areas A,B] [--repeat 2]
                            [--ceiling 2000]
"""

from __future__ import annotations

import argparse
import gc
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
        stamps = [r["time"] for r in records if r.get("case_id")]  # (verdicts: not a run's start and end)
        return dt, max(stamps) - min(stamps), len(stamps)


def certify_tests(name: str) -> list[tuple[str, Any, Any]]:
    """The certify tests the backend's capabilities allow: id, area, features (narrowed)."""
    from gradcert.backends.registry import resolve
    from gradcert.conformance.areas import tests

    caps = resolve(name).capabilities
    return [
        (test_id, t._gradcert_area, t._gradcert_features.narrow(caps))
        for test_id, t in tests().items()
        if t._gradcert_area.needs <= caps
    ]


def ceiling_child(n: int) -> None:
    """Judges certify's reference checks 0..n-1 in this process, after 20 untimed warm-up checks and
    a `go` line on stdin; prints `loop SECONDS`."""
    from gradcert.conformance.judging import draw_and_check
    from gradcert.conformance.session import Session

    chosen = certify_tests("reference")
    with tempfile.TemporaryDirectory() as d:
        s = Session("reference", Path(d) / "r.jsonl", Path(d) / "f", isolate=False)
        gc.freeze()  # as certify's plugin does once a worker's session is up
        for k in [*range(10**6, 10**6 + 20), *range(n)]:
            if k == 0:
                print("ready", flush=True)
                sys.stdin.readline()
                t = time.perf_counter()
            test_id, area, features = chosen[k % len(chosen)]
            draw_and_check(s, test_id, area, features, 1, k)
        print(f"loop {time.perf_counter() - t!r}", flush=True)
        s.close()


def loops(processes: int, n: int) -> list[float]:
    """The loop times of `processes` ceiling children of `n` checks each, started together."""
    cmd = [sys.executable, __file__, "--child-ceiling", str(n)]
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    for p in procs:  # each warmed up
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    times = []
    for p in procs:
        out, _ = p.communicate()
        times.append(float(out.split()[-1]))
    return times


def ceiling(n: int) -> tuple[float, float]:
    """The machine's own figures for this work: the time of n checks in one process, and of n/2 in
    each of two at once (the slower of the two)."""
    one, two = loops(1, n)[0], max(loops(2, n // 2))
    print(f"ceiling: {n} checks in one process {one:.2f} s, {n // 2} in each of two at once {two:.2f} s", flush=True)
    return one, two


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="reference,paddle")
    ap.add_argument("--profile", default="certify")
    ap.add_argument("--areas", default="")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--ceiling", type=int, default=2000, help="reference checks for the machine's own ratio (0: none)")
    ap.add_argument("--child-ceiling", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ceiling == 1:
        ap.error("--ceiling: 0 (none) or at least 2 (half of them in each of two processes)")
    if args.child_ceiling is not None:
        ceiling_child(args.child_ceiling)
        return
    ratios = []
    alone, together = float("inf"), float("inf")  # the ceiling's best times, measured beside the first backend's runs
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
            if args.ceiling and backend == args.backends.split(",")[0]:
                one, two = ceiling(args.ceiling)
                alone, together = min(alone, one), min(together, two)
        ratios += [(backend, kind, best[kind, 2] / best[kind, 1]) for kind in ("end to end", "steady")]
    for backend, kind, r in ratios:
        print(f"ratio throughput 2 workers / 1 worker, {kind} ({backend}, {args.profile}): {r:.2f} (target >= 1.8)")
    if args.ceiling:
        print(
            "ratio 2 processes / 1 process of in-process reference checks (the machine's ceiling): "
            f"{alone / together:.2f}"
        )


if __name__ == "__main__":
    main()
