"""The oracles: semantics, the reference backward, structural invariants, finite differences.

Tolerances, and why (docs/oracles.md holds the measurements they rest on; the values are in
`backends/protocol.py`, where an adapter compares by them too):

- reference: |g - g_ref| <= REF_ATOL + REF_RTOL * max|g_ref| per input. Two correct float64
  backwards differ by rounding only (kernel order, fused ops), orders of magnitude below 1e-9
  relative on the generators' bounded programs, while a 1e-6 relative error (a mutant of the test
  suite) stays far above it. The absolute part is not relative to the gradient: a cancellation
  (`1 - tanh(x)^2` near saturation) leaves an absolute error of about eps that the chain rule then
  multiplies by the values it passes through (several matmuls deep), so two correct backwards
  that round differently (JAX and the reference) differ by up to ~1e-12 on tiny gradients;
  REF_ATOL = 1e-10 sits well above that and well below any error a wrong rule makes.
- finite differences: |<g, v> - D| <= FD_ATOL + FD_RTOL * (sum_i <|g_i|, |v_i|> + |D|), with D the
  directional derivative by central differences and one Richardson step (h = 1e-3, truncation
  O(h^4) ~ 1e-12, rounding ~ eps |f| / h ~ 1e-13 for values bounded by 6). 1e-6 is far above
  both. Where a program's curvature is far larger (`x xT` squared three times, then `sin`: a
  polynomial of degree 16 under it, whose fifth derivative the truncation error scales with),
  h = 1e-3 truncates too much (tests/cases/matmul_power_curvature.case: the estimate's error falls
  16x with every halving of h, as truncation does). So an estimate that fails is made again at
  h / RETRY before a verdict: truncation 4,096x smaller, rounding ~eps |f| / h still ~1e-12. A
  wrong gradient stays wrong at any step; a right one whose first estimate was truncated passes
  the second.
- float32 cases (a program with any float32 value, `Case.dtype`): the expected gradients and
  finite differences come from the case's float64 twin (`Case.widened`: every float32 value made
  float64), so they keep float64's accuracy and only the backend's float32 rounding is left.
  F32_RTOL = 1e-4 and F32_ATOL = 1e-4 serve both oracles, and forward values are compared
  relative to their tensor's largest element (`Tolerance.normwise`). The absolute part is as large
  as the relative one: float32 rounding of a small gradient is relative to the large terms that
  cancelled to make it (the reference's own float32 run: 2.1e-5 absolute on a gradient of 5e-4,
  a matmul power under a saturated `tanh`, the worst in 200,000 fuzzed cases). Where a program's curvature
  amplifies float32 rounding (a matmul power under `tanh`), a correct framework's error exceeds
  them (JAX: 1.9e-4 relative), so a case's tolerances are widened to CONDITION times the
  reference's own float32 error on it, where that is larger (`float32_tolerance`: an estimate of
  how much rounding the case suffers; XLA's float32 kernels measured 10x the reference's NumPy
  error). docs/oracles.md has the measurements (`bench/float32_errors.py`).
- a perturbed run whose trace differs (a branch, trip count or kink side flipped) makes the case
  `invalid`: the derivative does not exist there as a smooth one, so nothing is judged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcert.backends.protocol import F32_ATOL, F32_RTOL, TOLERANCES, BackendResult, Tolerance, close
from gradcert.conformance.verdicts import FAILING, Status, Verdict
from gradcert.generators.case import Case
from gradcert.reference.autodiff.gradients import first_order
from gradcert.reference.finite_diff import STEP, Base, directional, held_values, jacobian_vjp, unperturbed
from gradcert.reference.ir import Program
from gradcert.reference.ir.types import TensorType, Type, VectorType, is_differentiable

RETRY = 8  # a failing estimate is made again with a step this much smaller (truncation: 4,096x less)


def _names(case: Case) -> list[str]:
    return [str(case.program.inputs[i].name) for i in case.wrt]


def _listing(xs: Sequence[np.ndarray | None], names: Sequence[str]) -> dict[str, object]:
    return {n: (None if x is None else np.asarray(x).tolist()) for n, x in zip(names, xs)}


def lowering(case: Case, got: BackendResult, ref: BackendResult, tol: Tolerance | None = None) -> Verdict | None:
    """The backend's forward outputs equal the reference interpreter's, before any gradient is
    judged. At first order a difference is the adapter's lowering bug (an `error`, not a finding
    on the backend); at second order the "forward" is the first-order gradients, and a difference
    there is a wrong gradient."""
    if got.forward is None or ref.forward is None or got is ref:
        return None
    tol = tol or TOLERANCES[case.dtype]
    if len(got.forward) != len(ref.forward):
        what = "first-order gradients (not None)" if case.order == 2 else "forward outputs"
        return Verdict(
            Status.FAIL if case.order == 2 else Status.ERROR,
            "first_order" if case.order == 2 else "lowering",
            f"{len(got.forward)} {what} where the reference has {len(ref.forward)}",
        )
    for k, (y, r) in enumerate(zip(got.forward, ref.forward)):
        y, r = np.asarray(y), np.asarray(r)
        if y.shape != r.shape:
            bad = f"has shape {list(y.shape)}, not {list(r.shape)}"
        elif r.size and not close(y, r, tol):
            bad = f"differs by {float(np.max(np.abs(y - r))):.3g}"
        else:
            continue
        if case.order == 2:
            return Verdict(Status.FAIL, "first_order", f"first-order gradient {k} {bad} from the reference backward")
        return Verdict(
            Status.ERROR,
            "lowering",
            f"the backend's forward output {k} {bad} from the reference interpreter: "
            "a lowering bug of the adapter, not a finding on the backend",
        )
    return None


def semantics(case: Case, got: BackendResult, ref: BackendResult, tol: Tolerance | None = None) -> Verdict | None:
    """None exactly where no gradient belongs; shapes and dtypes equal to the inputs'."""
    names = _names(case)
    if len(got.grads) != len(case.wrt):
        return Verdict(Status.FAIL, "semantics", f"{len(got.grads)} gradients for {len(case.wrt)} inputs")
    for name, i, g, r in zip(names, case.wrt, got.grads, ref.grads):
        x = case.inputs[i]
        if (g is None) != (r is None):
            why = "no gradient belongs to it" if r is None else "it has a path to the outputs"
            return Verdict(
                Status.FAIL,
                "semantics",
                f"%{name}: got {'None' if g is None else 'a gradient'} but {why}",
                [name],
                expected=_listing(ref.grads, names),
                actual=_listing(got.grads, names),
            )
        if g is not None and (g.shape != x.shape or g.dtype != x.dtype):
            return Verdict(
                Status.FAIL,
                "semantics",
                f"%{name}: gradient is {g.dtype}{list(g.shape)}, input is {x.dtype}{list(x.shape)}",
                [name],
            )
    return None


def reference(case: Case, got: BackendResult, ref: BackendResult, tol: Tolerance | None = None) -> Verdict | None:
    if got is ref:  # certifying the reference itself
        return None
    names = _names(case)
    tol = tol or TOLERANCES[case.dtype]
    wrong, worst_abs, worst_rel = [], 0.0, 0.0
    for name, g, r in zip(names, got.grads, ref.grads):
        if g is None or r is None:
            continue
        finite = bool(np.all(np.isfinite(g)))
        # (a NaN's error is no number: said as infinite, never as the 0 that max() would keep)
        err = (float(np.max(np.abs(g - r))) if g.size else 0.0) if finite else float("inf")
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        if not finite or err > tol.ref_atol + tol.ref_rtol * scale:
            wrong.append(name)
            worst_abs = max(worst_abs, err)
            worst_rel = max(worst_rel, err / scale if scale else float("inf"))
    if not wrong:
        return None
    return Verdict(
        Status.FAIL,
        "reference",
        f"gradient of {', '.join('%' + n for n in wrong)} differs from the "
        f"reference backward (max abs {worst_abs:.3g}, rel {worst_rel:.3g})",
        wrong,
        worst_abs,
        worst_rel,
        _listing(ref.grads, names),
        _listing(got.grads, names),
    )


def invariants(got: BackendResult) -> Verdict | None:
    found = list(got.violations)
    for op in got.backward_ops or []:
        if op.added and op.unused and not op.effects:
            kind = "zero-fill" if op.zero_fill else "dead backward op"
            # a backend that checks its own program (the reference) may have said so, with the line
            if not any(v.startswith(kind) and f"'{op.name}'" in v for v in got.violations):
                found.append(f"{kind} '{op.name}' has no use")
    if not found:
        return None
    return Verdict(Status.FAIL, "invariants", "; ".join(dict.fromkeys(found)))


@dataclass
class _FdSetup:
    program: Program
    inputs: list[np.ndarray]
    cotangents: list[np.ndarray | None]
    held: frozenset  # type: ignore[type-arg]
    free: list[int]  # positions in case.wrt that are perturbed
    base: Base  # the unperturbed run


def _setup(case: Case, xp: Any = np) -> _FdSetup:
    """What finite differences need of `case`: the program (order 2: its first-order gradients, the
    generator's where it made them, `Case.first_order`), inputs, cotangents, held values, and the
    unperturbed run: the generator's where it made one (it computes every value of the program as
    it draws it: `Case.evaluated`). A float32 case is differentiated on its float64 twin."""
    case = case.widened()
    blocked = {v for v in case.program.inputs if v.stop_gradient} | set(case.no_grad)
    if case.order == 1:
        p, inputs = case.program, list(case.inputs)
        cots: list[np.ndarray | None] = [None] * len(p.outputs)  # None: the output is not differentiated
        for k, i in enumerate(case.outputs):
            t = p.outputs[i].type
            if is_differentiable(t):
                cots[i] = case.cotangents[k] if case.cotangents is not None else np.ones(_shape(t))
        held = held_values(p, case.no_grad)
        ran = case.evaluated
    else:
        made = case.first_order
        if made is not None and made.of(case.program, case.outputs, case.wrt, case.cotangents, case.no_grad):
            p, extra = made.program, made.feeds
        else:
            p, extra = first_order(case.program, case.output_values, case.wrt_values, case.cotangents, case.no_grad)
        inputs = list(case.inputs) + extra
        cots = list(case.cotangents2) if case.cotangents2 is not None else [np.ones(_shape(v.type)) for v in p.outputs]
        held = held_values(p)
        blocked = {v for v in case.program.inputs if v.stop_gradient}
        ran = None
    free = [k for k, i in enumerate(case.wrt) if case.program.inputs[i] not in blocked]
    return _FdSetup(p, inputs, cots, held, free, unperturbed(p, inputs, held, ran, xp) if free else Base([], {}))


def _shape(t: Type) -> tuple[int, ...]:
    """The shape of a value of type `t` as the interpreter computes it (a vector: its tensors stacked)."""
    if isinstance(t, VectorType):
        return (len(t.elems), *(t.elems[0].shape if t.elems else ()))
    assert isinstance(t, TensorType), t
    return t.shape


_STREAM = 4096  # values of each seed's normal stream kept: the inputs of any drawn case, many times over


@functools.lru_cache(maxsize=8)
def _stream(seed: int) -> np.ndarray:
    stream = np.random.default_rng(seed).normal(size=_STREAM)
    stream.flags.writeable = False
    return stream


def normals(seed: int, shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """Standard normal arrays of `shapes`: the values `default_rng(seed).normal(size=shape)` gives
    for each shape in turn (the generator makes its normals one by one from its stream: the arrays
    are consecutive pieces of one long draw), cut from a draw kept per seed: seeding a generator
    costs many times more than drawing a case's few normals from one."""
    sizes = [math.prod(shape) for shape in shapes]
    if sum(sizes) > _STREAM:
        rng = np.random.default_rng(seed)
        return [rng.normal(size=shape) for shape in shapes]
    stream, out, at = _stream(seed), [], 0
    for shape, n in zip(shapes, sizes):
        out.append(stream[at : at + n].reshape(shape).copy())
        at += n
    return out


def finite_differences(
    case: Case, got: BackendResult, seed: int = 0, xp: Any = np, tol: Tolerance | None = None
) -> Verdict | None:
    """Directional finite differences, the program run on the array namespace `xp`; on failure,
    localised per input. Returns an `invalid` verdict when the perturbation changes the trace, a
    `pass` with the error measured, or None when no input is free to perturb."""
    s = _setup(case, xp)
    if not s.free:
        return None
    tol = tol or TOLERANCES[case.dtype]
    dirs = dict(zip(s.free, normals(seed, [case.inputs[case.wrt[k]].shape for k in s.free])))

    def check(ks: Sequence[int], step: float = STEP) -> tuple[bool | None, float, float]:
        direction: list[np.ndarray | None] = [None] * len(s.inputs)
        for k in ks:
            direction[case.wrt[k]] = dirs[k]
        d = directional(s.program, s.inputs, direction, s.cotangents, s.held, step, base=s.base, xp=xp)
        if not d.valid:
            return None, 0.0, 0.0
        gs = [(g, dirs[k]) for k in ks if (g := got.grads[k]) is not None]
        pred = sum(float(np.vdot(g, v)) for g, v in gs)
        scale = sum(float(np.vdot(np.abs(g), np.abs(v))) for g, v in gs) + abs(d.value)
        err = abs(pred - d.value)
        return err <= tol.fd_atol + tol.fd_rtol * scale, err, err / scale if scale else 0.0

    step = STEP
    ok, err, rel = check(s.free)
    if ok is None:
        return Verdict(Status.INVALID, "finite_differences", "a branch, trip count or kink flipped under perturbation")
    if not ok:  # a second opinion, where the program's curvature outgrew the step (below)
        again = check(s.free, STEP / RETRY)
        if again[0] is not None:
            step, (ok, err, rel) = STEP / RETRY, again
    if ok:  # the measured error still goes on record: the report plots its distribution
        return Verdict(Status.PASS, "finite_differences", max_abs=err, max_rel=rel)
    names = _names(case)
    wrong = [names[k] for k in s.free if check([k], step)[0] is False]
    return Verdict(
        Status.FAIL,
        "finite_differences",
        f"directional derivative differs from finite differences "
        f"(abs {err:.3g}, rel {rel:.3g}); wrong: {', '.join('%' + n for n in wrong) or 'jointly'}",
        wrong,
        err,
        rel,
        actual=_listing(got.grads, names),
    )


def full_jacobian(case: Case, got: BackendResult, xp: Any = np, tol: Tolerance | None = None) -> Verdict | None:
    """Exhaustive mode, for small programs: every gradient element against finite differences
    along that element alone (one directional estimate per input element)."""
    s = _setup(case, xp)
    tol = tol or TOLERANCES[case.dtype]
    names = _names(case)
    positions = [case.wrt[k] for k in s.free]
    expect, valid = jacobian_vjp(s.program, s.inputs, positions, s.cotangents, s.held, base=s.base, xp=xp)
    if not valid:
        return Verdict(Status.INVALID, "full_jacobian", "a branch, trip count or kink flipped under perturbation")
    wrong, worst = [], 0.0
    for k, e in zip(s.free, expect):
        g = got.grads[k] if got.grads[k] is not None else np.zeros_like(e)
        err = float(np.max(np.abs(g - e))) if e.size else 0.0
        if err > tol.fd_atol + tol.fd_rtol * (float(np.max(np.abs(e))) if e.size else 0.0) * 10:
            wrong.append(names[k])
            worst = max(worst, err)
    if not wrong:
        return None
    return Verdict(
        Status.FAIL,
        "full_jacobian",
        f"gradient of {', '.join('%' + n for n in wrong)} differs from the "
        f"finite-difference Jacobian (max abs {worst:.3g})",
        wrong,
        worst,
        actual=_listing(got.grads, names),
    )


CONDITION = 100  # a float32 case's tolerance is at least this many times the reference's own float32 error


def float32_tolerance(own: BackendResult, twin: BackendResult) -> Tolerance:
    """The tolerances a float32 case is judged to, from how far the reference's own float32 run
    (`own`) lands from the float64 twin's answer (`twin`): that distance measures how much float32
    rounding the case suffers (a high-curvature program cancels far more than the unit roundoff
    suggests), and another framework's float32 kernels round differently again (XLA's `tanh` and
    matmul on a CPU: 10x the reference's NumPy error, measured). So a tolerance is the larger of
    F32's and CONDITION times that distance, absolute and relative alike; on a well-conditioned
    case that leaves F32's."""
    dev = rel = 0.0
    for g, r in [*zip(own.grads, twin.grads), *zip(own.forward or [], twin.forward or [])]:
        if g is None or r is None or not np.size(r):
            continue
        err = float(np.max(np.abs(np.asarray(g, dtype=np.float64) - r)))
        dev = max(dev, err)
        rel = max(rel, err / max(float(np.max(np.abs(r))), F32_ATOL))
    atol, rtol = max(F32_ATOL, CONDITION * dev), max(F32_RTOL, CONDITION * rel)
    return Tolerance(rtol, atol, rtol, atol, normwise=True)


EXHAUSTIVE_MAX = 24  # input elements up to which `exhaustive` runs the full-Jacobian mode


def judge(
    case: Case,
    got: BackendResult,
    ref: BackendResult,
    seed: int = 0,
    exhaustive: bool = False,
    xp: Any = np,
    known: Callable[[Verdict], bool] | None = None,
    tol: Tolerance | None = None,
) -> Verdict:
    """The first oracle that fails, else `invalid` if finite differences cannot judge, else pass.
    With `exhaustive`, programs with at most EXHAUSTIVE_MAX input elements get the full Jacobian.
    `xp`: the array namespace finite differences run the program on (CuPy: on a GPU).

    `tol`: the tolerances (default: the case's dtype's, `TOLERANCES`; a float32 case's are
    `float32_tolerance`'s, where the session can run the reference in float32).

    `known`: whether a failure is a known defect's. A known defect's failure does not end the judging: the
    oracles after it that judge another aspect (`_ORACLES`: the lowering, the structure of the
    answer, its values, the backward program) judge on, and the first failure that is not known is
    the verdict, so that a known defect in a case does not hide a new one of another aspect (two
    wrong values in one case are one failure: the value oracles cannot tell them apart); only where
    every failure is known is the first one the verdict. A later failure of only the inputs a
    known defect's failure named is that failure again, seen by another oracle (a gradient where none
    belongs is a wrong value to finite differences too)."""
    first_known: Verdict | None = None
    seen: set[str] = set()  # the aspects a known defect's failure was found in
    named: set[str] = set()  # the inputs the known defects' failures named
    for aspect, oracle in _ORACLES:
        if aspect in seen:
            continue
        v = oracle(case, got, ref, tol) if oracle is not _fd else _fd(case, got, seed, exhaustive, xp, tol)
        if v is None:
            continue
        if v.status not in FAILING:  # finite differences' pass (its error measured) or `invalid`: the end
            return first_known or v
        if first_known is not None and v.inputs and set(v.inputs) <= named:
            continue
        if known is None or not known(v):
            return v
        first_known = first_known or v
        seen.update(_CONSEQUENCES.get(v.oracle, (aspect,)))
        named.update(v.inputs)
    return first_known or Verdict(Status.PASS)


def _fd(case: Case, got: BackendResult, seed: int, exhaustive: bool, xp: Any, tol: Tolerance | None) -> Verdict | None:
    small = sum(case.inputs[i].size for i in case.wrt) <= EXHAUSTIVE_MAX
    return full_jacobian(case, got, xp, tol) if exhaustive and small else finite_differences(case, got, seed, xp, tol)


# the aspects a known defect's failure of an oracle leaves unjudgeable: a second-order case whose first-order
# gradients (its "forward") are wrong is judged no further, its second backward being built on them
_CONSEQUENCES = {"first_order": ("lowering", "values", "program")}

_ORACLES: list[tuple[str, Callable[..., Verdict | None]]] = [
    ("lowering", lowering),
    ("structure", semantics),
    ("values", reference),
    ("program", lambda case, got, ref, tol: invariants(got)),
    ("values", _fd),
]


CLEAR = 10  # a shrunk case's wrong value is at least this many times the oracle's tolerance


def clear(v: Verdict, dtype: str = "f64") -> bool:
    """Whether a failing verdict fails clearly: a wrong value at least CLEAR times its oracle's
    tolerance for the case's `dtype`, both absolute and relative (every other kind of failure is
    clear as it is), so that a minimal case never looks like rounding noise."""
    t = TOLERANCES[dtype]
    tolerances = {
        "reference": (t.ref_atol, t.ref_rtol),
        "first_order": (t.ref_atol, t.ref_rtol),
        "linearity": (t.ref_atol, t.ref_rtol),
        "finite_differences": (t.fd_atol, t.fd_rtol),
        "full_jacobian": (t.fd_atol, t.fd_rtol),
    }
    if not v.kind.startswith("wrong value") or v.oracle not in tolerances:
        return True
    atol, rtol = tolerances[v.oracle]
    return v.max_abs >= CLEAR * atol and (v.max_rel >= CLEAR * rtol or v.oracle == "full_jacobian")
