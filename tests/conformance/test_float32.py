"""float32 programs: drawn valid (float32 throughout, float64 inputs and outputs crossing by
`cast`), judged against their float64 twin to float32 tolerances that pass every correct answer
measured and fail a wrong one, and shown by dtype in a run's report."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gradcert.backends import ReferenceBackend
from gradcert.backends.protocol import TOLERANCES, BackendResult
from gradcert.conformance.oracles import clear, judge
from gradcert.generators import FULL, Features, draw_case
from gradcert.generators.case import describe
from gradcert.reference.ir.types import TensorType

from ..conftest import run_cli

F32 = Features(FULL.enabled, required=frozenset({"float32"}))


def _types(case):  # type: ignore[no-untyped-def]
    values = list(case.program.inputs) + [r for op in case.program.walk() for r in op.results]
    return [v.type for v in values if isinstance(v.type, TensorType)]


def test_float32_draws_compute_in_float32_and_cross_to_float64_by_cast() -> None:
    cast_in = cast_out = 0
    for seed in range(150):
        case = draw_case(seed, F32)
        assert case.dtype == "f32" and "float32" in describe(case)
        floats = [t.dtype for t in _types(case) if t.dtype in ("f32", "f64")]
        assert "f32" in floats
        for x, v in zip(case.inputs, case.program.inputs):
            assert x.dtype == {"f32": np.float32, "f64": np.float64, "i64": np.int64}[v.type.dtype]
        for u, y in zip(case.cotangents or [], case.output_values):
            assert u.dtype == (np.float32 if y.type.dtype == "f32" else np.float64)
        casts = [op for op in case.program.walk() if op.name == "cast"]
        cast_in += any(op.operands[0] in case.program.inputs for op in casts)
        cast_out += any(op.results[0] in case.program.outputs for op in casts)
    assert cast_in >= 15 and cast_out >= 15, (cast_in, cast_out)
    # the areas that do not name float32 draw float64 only
    assert all(draw_case(seed, Features(FULL.enabled - {"float32"})).dtype == "f64" for seed in range(40))


def test_the_float64_twin_has_no_float32_value_and_the_same_inputs() -> None:
    case = next(c for s in range(50) if (c := draw_case(s, F32)).cotangents is not None)
    wide = case.widened()
    assert wide.dtype == "f64" and all(t.dtype != "f32" for t in _types(wide))
    assert [str(v.name) for v in wide.program.inputs] == [str(v.name) for v in case.program.inputs]
    for a, b in zip(case.inputs, wide.inputs):
        assert np.array_equal(a, b) and b.dtype != np.float32
    assert str(case.program) != str(wide.program) and "f32[" not in str(wide.program)
    plain = draw_case(0, Features(FULL.enabled - {"float32"}))
    assert plain.widened() is plain


def test_float32_tolerances_pass_correct_float32_answers_and_fail_wrong_ones() -> None:
    """The reference's own float32 answers (rounded in float32 at every op) pass against the twin;
    the same answers made wrong by 1% fail, clearly; a float64 answer 1e-6 off fails float64's."""
    ref = ReferenceBackend(listing=False)
    judged = wrong = 0
    for seed in range(120):
        case = draw_case(seed, F32)
        got, want = ref.run(case), ref.run(case.widened())
        assert all(g is None or g.dtype == x.dtype for g, x in zip(got.grads, (case.inputs[i] for i in case.wrt)))
        v = judge(case, got, want)
        assert v.status in ("pass", "invalid"), (seed, v.message)
        if not any(g is not None and np.abs(g).max() > 1e-2 for g in got.grads):
            continue
        judged += 1
        off = BackendResult(
            [None if g is None else (g * np.float32(1.01)).astype(g.dtype) for g in got.grads], forward=got.forward
        )
        w = judge(case, off, want)
        wrong += w.status == "fail" and clear(w, case.dtype)
    assert judged >= 60 and wrong == judged, (judged, wrong)
    for seed in range(50):
        case = draw_case(seed, Features(FULL.enabled - {"float32"}))
        got = ref.run(case)
        if any(g is not None and np.abs(g).max() > 1e-2 for g in got.grads):
            break
    assert case.dtype == "f64"
    off = BackendResult([None if g is None else g * (1 + 1e-6) for g in got.grads], forward=got.forward)
    assert judge(case, off, got).status == "fail"
    assert TOLERANCES["f32"].ref_rtol > 100 * TOLERANCES["f64"].fd_rtol


def test_a_float64_gradient_for_a_float32_input_is_a_semantics_failure() -> None:
    ref = ReferenceBackend(listing=False)
    for seed in range(50):
        case = draw_case(seed, F32)
        got = ref.run(case)
        if any(g is not None and g.dtype == np.float32 for g in got.grads):
            break
    up = BackendResult([None if g is None else g.astype(np.float64) for g in got.grads], forward=got.forward)
    v = judge(case, up, ref.run(case.widened()))
    assert v.status == "fail" and v.oracle == "semantics" and "float64" in v.message


def test_the_report_shows_each_backends_cases_by_dtype(tmp_path: Path) -> None:
    results, report = tmp_path / "r.jsonl", tmp_path / "r.html"
    r = run_cli(
        "certify", "--backend", "reference", "--areas", "float32,matmul", "--workers", "1",
        "--results", str(results), "--report", str(report),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    page = report.read_text()
    assert "cases by dtype: f64 " in page and " · f32 " in page
