"""The GPU check, one prepared script for a machine with a GPU: certifies the frameworks on their
GPU devices, checks the reference on CuPy against NumPy, and times the reference backward on both.
Where no GPU (or no CuPy) is usable it runs what it can -- the NumPy half, the certifications on
the CPU -- and says what it skipped and why; CI never needs a GPU.

1. The reference backward (and its interpreter) on CuPy and on NumPy: every example program, and
   `--cases` drawn first- and second-order cases, must agree to 1e-9 relative; then a chain of two
   matmuls with a `tanh` between, at each size in `--sizes`, timed best of `--repeat` on each
   (ratio NumPy time / CuPy time: above 1, the GPU is faster).
2. `gradcert certify --backend B --device gpu --profile P` for each backend, beside the same run
   with `--device cpu` (ratio of their wall times); a certification that fails on the GPU and
   passes on the CPU is a GPU-only defect of the framework's.

Exit 1 on any disagreement or failed certification.

    python bench/gpu_check.py [--backends torch,jax] [--profile quick] [--areas A,B]
                              [--sizes 256,1024,2048,4096] [--repeat 3] [--cases 200]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from gradcert.backends.reference import ReferenceBackend
from gradcert.conformance import areas
from gradcert.conformance.judging import draw
from gradcert.generators.case import Case
from gradcert.generators.choices import Seeded
from gradcert.reference.autodiff.gradients import compute
from gradcert.reference.interpreter import InterpreterError, namespace
from gradcert.reference.ir.loader import load_program, parse_source
from gradcert.runs.check import Request, case_of

ROOT = Path(__file__).resolve().parent.parent
AGREE = 1e-9  # relative: float64 kernels on two devices differ by summation order alone

CHAIN = """program(%x: f64[{n},{n}], %w: f64[{n},{n}], %v: f64[{n},{n}]) {{
  %h = matmul(%x, %w) : f64[{n},{n}]
  %t = tanh(%h) : f64[{n},{n}]
  %o = matmul(%t, %v) : f64[{n},{n}]
  return %o
}}"""


def gpu() -> tuple[Any, str]:
    """CuPy, or None and why not."""
    try:
        return namespace("gpu"), ""
    except InterpreterError as e:
        return None, str(e)


def differ(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    scale = max(float(np.max(np.abs(a))) if a.size else 0.0, 1.0)
    return bool(a.shape != b.shape or (a.size and float(np.max(np.abs(a - b))) > AGREE * scale))


def agreement(cp: Any, n_cases: int) -> int:
    """Cases whose gradients differ between NumPy and CuPy (printed)."""
    on_numpy, on_gpu = ReferenceBackend(listing=False), ReferenceBackend(listing=False, xp=cp)
    cases: list[tuple[str, Case]] = []
    for path in sorted((ROOT / "examples").glob("*.gc")):
        program = load_program(path)
        cases.append((path.name, case_of(program, Request(None, None, "ones", (), 1, None), 0, str(path))))
    chosen = [t for t in areas.tests().values() if t._gradcert_area.check != "bad_request"]
    for k in range(n_cases):
        t = chosen[k % len(chosen)]
        a, f = t._gradcert_area, t._gradcert_features
        cases.append((f"{a.name} draw {k}", draw(Seeded(k + 1), f, a.order, a.name)))
    bad = 0
    for name, case in cases:
        x, y = on_numpy.run(case), on_gpu.run(case)
        if any(differ(p, q) for p, q in zip(x.grads, y.grads)):
            bad += 1
            print(f"DISAGREE: {name}: CuPy's gradients differ from NumPy's\n{case.to_text()}", flush=True)
    print(f"reference on CuPy against NumPy: {len(cases)} cases, {bad} disagree", flush=True)
    return bad


def best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def timing(cp: Any, why: str, sizes: list[int], repeat: int) -> int:
    bad = 0
    for n in sizes:
        program = parse_source(CHAIN.format(n=n))
        rng = np.random.default_rng(n)
        xs = [rng.normal(size=(n, n)) / np.sqrt(n) for _ in range(3)]
        wrt = program.inputs
        run_np = lambda: compute(program, xs, program.outputs, wrt)  # noqa: E731
        t_np = best(run_np, repeat)
        if cp is None:
            print(f"reference backward at {n}: NumPy {t_np:.3f} s; CuPy skipped ({why})", flush=True)
            continue

        def run_cp() -> Any:
            out = compute(program, xs, program.outputs, wrt, xp=cp)
            cp.cuda.Device().synchronize()
            return out

        run_cp()  # (CuPy compiles its kernels at first use)
        t_cp = best(run_cp, repeat)
        if any(differ(a, b) for a, b in zip(run_np().grads, run_cp().grads)):
            bad += 1
            print(f"DISAGREE: the {n}x{n} matmul chain's gradients differ between NumPy and CuPy", flush=True)
        print(f"reference backward at {n}: NumPy {t_np:.3f} s, CuPy {t_cp:.4f} s", flush=True)
        print(f"ratio NumPy / CuPy reference backward at {n}: {t_np / t_cp:.2f}", flush=True)
    return bad


def certify(backend: str, device: str, profile: str, area_list: str, folder: Path) -> tuple[int, float, str]:
    """Exit status, wall time and last output line of one certify run."""
    cmd = [sys.executable, "-m", "gradcert.cli", "certify", "--backend", backend, "--device", device]
    cmd += ["--profile", profile, "--workers", "1", "--results", str(folder / "r.jsonl")]
    cmd += ["--report", str(folder / "r.html"), "--findings", str(folder / "f")]
    cmd += ["--areas", area_list] if area_list else []
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = (r.stderr if r.returncode == 2 else r.stdout).strip().splitlines()  # (the verdict, or the refusal)
    return r.returncode, time.perf_counter() - t, lines[-1] if lines else ""


def certifications(backends: list[str], profile: str, area_list: str) -> int:
    bad = 0
    for b in backends:
        with tempfile.TemporaryDirectory() as d:
            code_cpu, t_cpu, said_cpu = certify(b, "cpu", profile, area_list, Path(d) / "cpu")
            code_gpu, t_gpu, said_gpu = certify(b, "gpu", profile, area_list, Path(d) / "gpu")
        print(f"certify {b} --device cpu --profile {profile}: exit {code_cpu}, {t_cpu:.1f} s: {said_cpu}", flush=True)
        if code_gpu == 2:
            print(f"certify {b} --device gpu: skipped ({said_gpu})", flush=True)
        else:
            print(f"certify {b} --device gpu --profile {profile}: exit {code_gpu}, {t_gpu:.1f} s: {said_gpu}")
            print(f"ratio certify time gpu / cpu, {b}: {t_gpu / t_cpu:.2f}", flush=True)
        bad += code_cpu != 0 or code_gpu not in (0, 2)
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="torch,jax")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--areas", default="")
    ap.add_argument("--sizes", default="256,1024,2048,4096")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", type=int, default=200, help="drawn cases for the CuPy / NumPy agreement")
    args = ap.parse_args()
    cp, why = gpu()
    print(f"GPU: {'CuPy ' + cp.__version__ + ', device ' + str(cp.cuda.Device().id) if cp is not None else why}")
    bad = 0
    if cp is None:
        print(f"reference on CuPy against NumPy: skipped ({why})", flush=True)
    else:
        bad += agreement(cp, args.cases)
    bad += timing(cp, why, [int(n) for n in args.sizes.split(",")], args.repeat)
    bad += certifications([b for b in args.backends.split(",") if b], args.profile, args.areas)
    print(f"disagreements and failures: {bad}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
