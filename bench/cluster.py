"""Fuzzing throughput on a Ray cluster beside the local engine: `gradcert fuzz` verdicts per second
with `--engine ray` on a local cluster of 1 and 2 workers and with `--engine local` (pytest-xdist)
with 1 and 2, in one run, alternating so that machine noise hits each alike; then the cost a shard
adds (a shard judging one case, against that case judged in a running shard) and the driver's
ingest ceiling (verdict records written per second when workers only hand back answers already
made: the driver's own work per verdict, with no worker to wait for).

Throughput counts verdicts from the first to the last (a cluster's start, the shrink at the end and
the report left out, printed apart as the command's wall time).

    python bench/cluster.py [--minutes 0.5] [--backend reference] [--areas A,B] [--shards 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def fuzz(engine: str, workers: int, minutes: float, backend: str, areas: str) -> tuple[float, float, int]:
    """(wall seconds, verdicts per second first to last, verdicts) of one `gradcert fuzz` night."""
    with tempfile.TemporaryDirectory() as d:
        results = Path(d) / "r.jsonl"
        cmd = [sys.executable, "-m", "gradcert.cli", "fuzz", "--engine", engine, "--backend", backend]
        cmd += ["--workers", str(workers), "--minutes", str(minutes), "--results", str(results)]
        cmd += ["--db", str(Path(d) / "db"), *(["--areas", areas] if areas else [])]
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if r.returncode not in (0, 1):
            sys.exit(f"fuzz --engine {engine} failed ({r.returncode}): {r.stderr[-2000:]}")
        stamps = [json.loads(x)["time"] for x in results.read_text().splitlines() if '"case_id"' in x]
        return wall, len(stamps) / (max(stamps) - min(stamps)), len(stamps)


def shard_overhead(backend: str, shards: int) -> tuple[float, float]:
    """(seconds a one-case shard takes end to end on a warm 1-worker cluster, seconds a case takes
    inside a running shard), the same test's cases."""
    import ray

    from gradcert.conformance.areas import tests
    from gradcert.runs.cluster import Options, judge_shard

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        task = ray.remote(num_returns="streaming", max_retries=0)(judge_shard).options(num_cpus=1)
        opts = Options(backend, None, 60.0, None)
        test = next(t for t in tests() if "elementwise" in t)

        def drain(gen: Any) -> int:
            return sum(len(ray.get(ref)[1]) for ref in gen)

        drain(task.remote(opts, test, 1, 1, 2.0, False, False))  # (the worker's session made, modules loaded)
        t = time.perf_counter()
        for k in range(shards):
            drain(task.remote(opts, test, 2, 1 + k, 0.0, False, True))
        per_shard = (time.perf_counter() - t) / shards
        t = time.perf_counter()
        n = drain(task.remote(opts, test, 3, 1, 3.0, False, False))
        per_case = (time.perf_counter() - t) / n
        return per_shard, per_case
    finally:
        ray.shutdown()


def ingest(n: int) -> float:
    """Verdict records per second the driver writes (dedupe, append, group failures)."""
    from gradcert.runs.cluster import Writer

    record = {
        "test_id": "test_elementwise.py::test_unary",
        "area": "elementwise",
        "backend": "reference",
        "status": "pass",
        "oracle": "",
        "message": "",
        "timings": {"total": 0.001, "backend": 0.0005},
        "size": 7,
        "worker": "host:1234",
    }
    with tempfile.TemporaryDirectory() as d:
        writer = Writer(Path(d) / "r.jsonl", set())
        batch = [dict(record, case_id=f"seed:{k:x}", draw=f"seed:{k:x}") for k in range(n)]
        t = time.perf_counter()
        for r in batch:
            writer.write([r])
        dt = time.perf_counter() - t
        writer.out.close()
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=0.5)
    ap.add_argument("--backend", default="reference")
    ap.add_argument("--areas", default="")
    ap.add_argument("--shards", type=int, default=40)
    a = ap.parse_args()
    rows = {}
    for engine, workers in (("local", 1), ("ray", 1), ("local", 2), ("ray", 2)):
        rows[(engine, workers)] = fuzz(engine, workers, a.minutes, a.backend, a.areas)
        wall, rate, n = rows[(engine, workers)]
        print(f"--engine {engine:5} --workers {workers}: {rate:7.1f} verdicts/s ({n} verdicts, command {wall:.1f} s)")
    r = {k: v[1] for k, v in rows.items()}
    print(f"ray/local, 1 worker: {r[('ray', 1)] / r[('local', 1)]:.2f}")
    print(f"ray/local, 2 workers: {r[('ray', 2)] / r[('local', 2)]:.2f}")
    print(f"2 workers/1, ray: {r[('ray', 2)] / r[('ray', 1)]:.2f}; local: {r[('local', 2)] / r[('local', 1)]:.2f}")
    per_shard, per_case = shard_overhead(a.backend, a.shards)
    print(f"a one-case shard: {per_shard * 1e3:.1f} ms; a case in a running shard: {per_case * 1e3:.2f} ms")
    print(f"per-shard overhead: {(per_shard - per_case) * 1e3:.1f} ms")
    print(f"driver ingest ceiling: {ingest(50_000):,.0f} verdicts/s")


if __name__ == "__main__":
    main()
