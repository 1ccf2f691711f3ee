"""`--device`: the GPU path's plumbing, exercised on the CPU through the same code (the oracles and
the reference on a non-NumPy namespace, `array_api_strict`; `--device cpu` end to end), and the
one-line refusals where no GPU is usable. No fake stands in for a GPU: `bench/gpu_check.py` runs
the GPU itself where one is lent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import array_api_strict
import numpy as np
import pytest

from gradcert.backends.reference import ReferenceBackend
from gradcert.backends.registry import UnknownBackend, resolve
from gradcert.conformance import areas
from gradcert.conformance.judging import draw
from gradcert.conformance.oracles import judge
from gradcert.generators.choices import Seeded
from gradcert.reference.interpreter import InterpreterError, namespace

from ..conftest import ROOT, certify, run_cli

EXAMPLES_DIR = ROOT / "examples"


def _gpu() -> str | None:
    """Why `--device gpu` cannot run here (None where CuPy finds a CUDA device)."""
    try:
        namespace("gpu")
    except InterpreterError as e:
        return str(e)
    return None


NO_GPU = _gpu()
needs_no_gpu = pytest.mark.skipif(NO_GPU is None, reason="a GPU is usable here: bench/gpu_check.py runs that path")


@needs_no_gpu
@pytest.mark.parametrize(
    "args",
    [
        ["certify", "--backend", "torch", "--profile", "quick"],
        ["fuzz", "--backend", "jax", "--minutes", "1"],
        ["check", str(EXAMPLES_DIR / "while_basic.gc")],
        ["replay", "test_if.py::test_if[simplest]"],
    ],
    ids=lambda a: a[0],
)
def test_gpu_without_one_is_one_line_and_exit_2(args: list[str], tmp_path: Path) -> None:
    r = run_cli(*args, "--device", "gpu", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == f"gradcert: error: {NO_GPU}\n", r.stderr
    assert r.stdout == "" and not (tmp_path / "reports").exists()


@pytest.mark.parametrize(
    "spec, says",
    [
        ("torch", "sees no CUDA device"),
        ("paddle", "is a CPU build: install paddlepaddle-gpu"),
        ("jax", "finds no GPU"),
    ],
)
def test_a_framework_without_a_gpu_build_says_so(spec: str, says: str) -> None:
    """The frameworks installed here are CPU builds: each backend, asked for the GPU, names why it
    cannot (a fresh process: JAX picks its platforms once)."""
    code = f"from gradcert.backends.registry import resolve; resolve({spec!r}, 'gpu')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and last.startswith(f"gradcert.backends.registry.UnknownBackend: backend {spec!r}")
    assert says in last and last.count("\n") == 0, last


def test_a_backend_that_declares_no_gpu_is_refused_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit's example backend declares no `devices`: the CPU only."""
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "third_party_backend"))
    with pytest.raises(
        UnknownBackend, match=r"^backend 'tape_backend:TapeBackend' does not run on gpu \(it declares cpu\)$"
    ):
        resolve("tape_backend:TapeBackend", "gpu")


def test_oracles_and_reference_on_another_namespace_agree_with_numpy() -> None:
    """What `--device gpu` changes in the judging, run on `array_api_strict` (no NumPy call can
    leak through it): the reference backward and finite differences, case for case, give the
    verdicts and errors they give on NumPy."""
    on_numpy, on_strict = ReferenceBackend(listing=False), ReferenceBackend(listing=False, xp=array_api_strict)
    judged = 0
    for i, t in enumerate(areas.tests().values()):
        area, features = t._gradcert_area, t._gradcert_features
        if area.check == "bad_request":
            continue
        for k in range(2):
            case = draw(Seeded(1000 * i + k + 1), features, area.order, area.name)
            expected, got = on_numpy.run(case), on_strict.run(case)
            for a, b in zip(expected.grads, got.grads):
                assert (a is None) == (b is None) and (a is None or np.allclose(a, b, rtol=1e-12, atol=1e-14))
            mine, theirs = judge(case, expected, expected), judge(case, got, expected, xp=array_api_strict)
            assert (mine.status, mine.oracle) == (theirs.status, theirs.oracle), case.to_text()
            assert abs(mine.max_abs - theirs.max_abs) <= 1e-12
            judged += 1
    assert judged >= 60


def test_device_cpu_explicitly_certifies_as_the_default(tmp_path: Path) -> None:
    r, recs = certify("reference", tmp_path, extra=["--device", "cpu", "--areas", "while,if"])
    assert r.returncode == 0, r.stdout + r.stderr
    cases = [x for x in recs if x.get("case_id")]
    planned = next(x["planned"] for x in recs if x.get("run") == "start")
    assert planned and len(cases) == planned and all(x["status"] == "pass" for x in cases)
    assert all("--device" not in x.get("replay", "") for x in cases)
