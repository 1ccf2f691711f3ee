"""Every benchmark under bench/ runs from this install and prints its ratios (at toy sizes: the
figures themselves are docs/performance.md's, measured at full size; nothing here is timed)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from .conftest import ENV, ROOT

NUMBER = r"-?\d+(\.\d+)?"

BENCHES = {
    "overhead.py": (
        ["--backends", "reference,paddle", "--profile", "quick", "--areas", "elementwise"]
        + ["--cases", "10", "--rounds", "2"],
        [
            f"ratio total / floor per check, {b}, {way}: {NUMBER}"
            for b in ("reference", "paddle")
            for way in ("certify", "in process")
        ],
    ),
    "cluster.py": (
        ["--minutes", "0.05", "--areas", "elementwise", "--shards", "3"],
        [f"ray/local, {w}: {NUMBER}" for w in ("1 worker", "2 workers")]
        + [f"per-shard overhead: {NUMBER} ms", f"driver ingest ceiling: {NUMBER}"],
    ),
    "scaling.py": (
        ["--backends", "reference", "--profile", "quick", "--areas", "elementwise", "--repeat", "1", "--ceiling", "40"],
        [
            *(
                f"ratio throughput 2 workers / 1 worker, {kind} \\(reference, quick\\): {NUMBER}"
                for kind in ("end to end", "steady")
            ),
            f"ratio 2 processes / 1 process of in-process reference checks \\(the machine's ceiling\\): {NUMBER}",
        ],
    ),
    "float32_errors.py": (
        ["--backends", "reference", "--cases", "20"],
        [
            f"ratio F32_RTOL / it: {NUMBER}",
            f"ratio F32_ATOL / it: {NUMBER}",
            r"false alarms, reference: 0",
            r"1% wrong gradients caught, reference: (\d+)/\1",
        ],
    ),
    "vs_gradcheck.py": (
        ["--programs", "5", "--sizes", "10,1000"],
        [
            f"ratio gradcert / gradcheck fast mode, time per check over 5 programs: {NUMBER}",
            f"ratio gradcheck full mode / gradcert at 1,000 elements: {NUMBER}",
        ],
    ),
    "backward_scaling.py": (
        ["--sizes", "100,200", "--repeat", "1"],
        [
            f"ratio time/op reference random 200 vs 100 ops: {NUMBER}",
            f"ratio Paddle grad\\(\\) / reference grad\\(\\) at 200 ops, chain: {NUMBER}",
        ],
    ),
    "gpu_check.py": (
        ["--backends", "torch", "--areas", "elementwise", "--sizes", "64", "--repeat", "1", "--cases", "10"],
        # (here without a GPU: the CPU halves run, the GPU halves say why they are skipped)
        [
            r"reference backward at 64: NumPy \d+\.\d+ s(; CuPy skipped \(.+\)|, CuPy)",
            r"certify torch --device cpu --profile quick: exit 0",
            r"certify torch --device gpu(: skipped \(gradcert: error: .+\)| --profile quick: exit 0)",
            r"disagreements and failures: 0",
        ],
    ),
    "jax_paths.py": (
        ["--profile", "quick", "--areas", "elementwise,while", "--workers", "1"],
        [
            *(f"verdicts that differ, jax / {p}: 0" for p in ("jax-eager", "jax-jit")),
            *(f"ratio certify time {p} / jax: {NUMBER}" for p in ("jax-eager", "jax-jit")),
        ],
    ),
    "certify_against.py": (
        ["--against", "HEAD", "--repeat", "1", "--profile", "quick", "--backend", "tests.mutants:WrongSinRule"]
        + ["--areas", "elementwise,while"],
        [
            f"ratio this tree / HEAD: {NUMBER}",
            rf"backend calls per failing case: mean {NUMBER}, 90th percentile \d+",
            r"failing cases localized to one op or construct: (\d+) of \1 \(100.0%\)",
        ],
    ),
    "generation.py": (
        ["--draws", "40"],
        [f"ratio fast path / hypothesis draws per second: {NUMBER}", f"pair coverage: {NUMBER}% of reachable pairs"],
    ),
    "fuzz_reference.py": (["--cases", "40"], [r"false alarms: 0; invalid rate: \d+\.\d+%"]),
    "crashes.py": (
        ["--cases", "16", "--crash-cases", "1"],
        [f"ratio crash-heavy \\(every case\\) / without crashes: {NUMBER}"],
    ),
    "memory.py": (
        ["--checks", "100"],
        [
            f"ratio held per verdict / record held whole, a session: {NUMBER}",
            f"ratio held per case / record held whole, the report: {NUMBER}",
        ],
    ),
}


@pytest.mark.parametrize("script", list(BENCHES))
def test_benchmark_runs_and_prints_its_ratios(script: str) -> None:
    args, expected = BENCHES[script]
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    missing = [pattern for pattern in expected if not re.search(pattern, r.stdout)]
    assert missing == [], r.stdout[-3000:]


def test_every_benchmark_is_exercised() -> None:
    assert set(BENCHES) == {p.name for p in (ROOT / "bench").glob("*.py")}


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="counting instructions needs valgrind")
def test_overhead_counts_instructions_side_by_side() -> None:
    """`bench/overhead.py --instructions N`: the in-process ratio counted by callgrind."""
    code = "import overhead; print('counted', overhead.instructions('reference', 60))"
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT / "bench",
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.search(rf"counted ({NUMBER})", r.stdout)
    # gradcert does more than the floor (each count moves by ~15 M instructions from run to run: 60
    # checks, ~9 M each, keep the ratio well clear of 1)
    assert found is not None and float(found.group(1)) > 1.0, r.stdout
