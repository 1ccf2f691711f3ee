"""Deliberately wrong backends built on the reference: each plants one bug that a backward
implementation could have. The `quick` profile must catch every one (tests/conformance/test_mutants.py)."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from gradcert.backends.protocol import BackendResult
from gradcert.backends.reference import ReferenceBackend
from gradcert.generators.case import Case
from gradcert.reference.autodiff import backward
from gradcert.reference.ir import clone
from gradcert.reference.ir.builder import Builder
from gradcert.reference.ops import OPS


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextmanager
def vjp_wrapped(op: str, wrap: Callable[[Any, Any, Any, Any, Any], Any]) -> Iterator[None]:
    old = OPS[op]
    OPS[op] = replace(old, vjp=lambda ctx, o, cts, needed: wrap(old.vjp, ctx, o, cts, needed))
    try:
        yield
    finally:
        OPS[op] = old


class Mutant(ReferenceBackend):
    name = "mutant"

    def patches(self) -> Any:
        return patched(self, "name", self.name)  # no patch

    def run(self, case: Case) -> BackendResult:
        with self.patches():
            return self.after(super().run(self.before(case)), case)

    def before(self, case: Case) -> Case:
        return case

    def after(self, r: BackendResult, case: Case) -> BackendResult:
        return r


class DropFanout(Mutant):
    """Sums all but the last contribution to a cotangent."""

    name = "drop-fanout"

    def patches(self) -> Any:
        orig = backward._Ctx._sum
        return patched(backward._Ctx, "_sum", lambda ctx, cs: orig(ctx, cs[:-1] if len(cs) > 1 else cs))


class ZeroFillOnes(Mutant):
    """Zero-fills with ones."""

    name = "zero-fill-ones"

    def patches(self) -> Any:
        def ones(ctx: Any, t: Any) -> Any:
            z = backward._Ctx.zeros.__wrapped__(ctx, t)  # type: ignore[attr-defined]
            if z.op.name == "full":
                z.op.attrs["value"] = 1.0
            return z

        return patched(backward._Ctx, "zeros", _wrapped(backward._Ctx.zeros, ones))


def _wrapped(orig: Any, new: Any) -> Any:
    new.__wrapped__ = orig
    return new


class IgnoreCotangents(Mutant):
    name = "ignore-cotangents"

    def before(self, case: Case) -> Case:
        return replace(case, cotangents=None)


class IgnoreNoGrad(Mutant):
    name = "ignore-no-grad"

    def before(self, case: Case) -> Case:
        return replace(case, no_grad=[])


class IgnoreStopGradient(Mutant):
    name = "ignore-stop-gradient"

    def before(self, case: Case) -> Case:
        p, m = clone(case.program)
        for op in p.walk():
            for r in op.results:
                r.stop_gradient = False
        for v in p.inputs:
            v.stop_gradient = False
        return replace(case, program=p, no_grad=[m[v] for v in case.no_grad])


class SwapIfBranches(Mutant):
    """Puts each branch's backward in the other branch of the backward `if`."""

    name = "swap-if-branches"

    def patches(self) -> Any:
        def wrap(vjp: Any, ctx: Any, op: Any, cts: Any, needed: Any) -> Any:
            out = vjp(ctx, op, cts, needed)
            made = [o for o in ctx.block.ops if o.name == "if" and o.origin is op]
            if made:
                then, other = made[-1].blocks
                then.ops, other.ops = other.ops, then.ops
                for b in (then, other):
                    for o in b.ops:
                        o.parent = b
            return out

        return vjp_wrapped("if", wrap)


class ForgetLoopAccumulation(Mutant):
    """A captured value's cotangent keeps only the last trip's contribution."""

    name = "forget-loop-accumulation"

    def patches(self) -> Any:
        def wrap(vjp: Any, ctx: Any, op: Any, cts: Any, needed: Any) -> Any:
            out = vjp(ctx, op, cts, needed)
            for loop in [o for o in ctx.block.ops if o.name == "while" and o.origin is op]:
                body = loop.blocks[1]
                term = body.terminator
                for k, v in enumerate(term.operands):
                    if v.op is not None and v.op.name == "add" and v.op.operands[0] is body.args[k]:
                        term.operands[k] = v.op.operands[1]
            return out

        return vjp_wrapped("while", wrap)


class ReadOverwritten(Mutant):
    """Reads the buffer an in-place op has overwritten instead of saving the value first."""

    name = "read-overwritten"

    def patches(self) -> Any:
        return patched(backward._Ctx, "_unclobbered", lambda ctx, v: v)


class UnusedFullLike(Mutant):
    """Leaves an unused `full_like` in the backward program."""

    name = "unused-full-like"

    def patches(self) -> Any:
        orig = backward._grad

        def grad(program: Any, *a: Any) -> Any:
            g = orig(program, *a)
            floats = [v for v in program.inputs if getattr(v.type, "dtype", "") in ("f64", "f32")]
            if floats:
                g.added.add(Builder(program.block).op("full_like", [floats[0]], {"value": 0.0}))
            return g

        return patched(backward, "_grad", grad)


class ZerosForUnreachable(Mutant):
    name = "zeros-for-unreachable"

    def after(self, r: BackendResult, case: Case) -> BackendResult:
        r.grads = [np.zeros_like(case.inputs[i]) if g is None else g for g, i in zip(r.grads, case.wrt)]
        return r


class RelativeError(Mutant):
    """Every gradient off by a relative 1e-6."""

    name = "relative-error"

    def after(self, r: BackendResult, case: Case) -> BackendResult:
        r.grads = [None if g is None else g * (1 + 1e-6) for g in r.grads]
        return r


class WrongSinRule(Mutant):
    """d sin(x) = -cos(x)."""

    name = "wrong-sin-rule"

    def patches(self) -> Any:
        return vjp_wrapped("sin", lambda vjp, ctx, op, cts, needed: [ctx.neg(v) for v in vjp(ctx, op, cts, needed)])


class WrongCosRule(Mutant):
    """d cos(x) = sin(x) (the sign dropped)."""

    name = "wrong-cos-rule"

    def patches(self) -> Any:
        return vjp_wrapped("cos", lambda vjp, ctx, op, cts, needed: [ctx.neg(v) for v in vjp(ctx, op, cts, needed)])


class WrongSinAndCosRules(Mutant):
    """Two bugs of one kind (a wrong value) in two ops: `sin`'s rule and `cos`'s rule negated. With
    tests/known/wrong-sin-and-cos-rules.toml, `sin`'s is known and `cos`'s new."""

    name = "wrong-sin-and-cos-rules"

    @contextmanager
    def patches(self) -> Iterator[None]:
        with WrongSinRule.patches(self), WrongCosRule.patches(self):  # type: ignore[arg-type]
            yield


class RepeatedNotAccumulated(Mutant):
    """The gradient of a value read twice by one op is not accumulated: the second operand's
    contribution is lost (in every binary op: a mechanism of the backward, not one op's rule)."""

    name = "repeated-not-accumulated"

    @contextmanager
    def patches(self) -> Iterator[None]:
        from gradcert.reference.ops.vjp import ZERO

        def wrap(vjp: Any, ctx: Any, op: Any, cts: Any, needed: Any) -> Any:
            out = vjp(ctx, op, cts, needed)
            return [out[0], ZERO] if len(op.operands) == 2 and op.operands[0] is op.operands[1] else out

        with ExitStack() as stack:
            for name in [n for n, o in OPS.items() if o.drawing.family == "binary"]:
                stack.enter_context(vjp_wrapped(name, wrap))
            yield


class WrongOnBigPrograms(Mutant):
    """Every gradient twice what it is, in programs of five ops or more: no part of one fails alone."""

    name = "wrong-on-big-programs"

    def after(self, r: BackendResult, case: Case) -> BackendResult:
        if case.size() >= 5:
            r.grads = [None if g is None else 2 * g for g in r.grads]
        return r


class WrongTanhAboveHalf(Mutant):
    """tanh's gradient doubled where its operand exceeds 0.5: a rule wrong at some values only."""

    name = "wrong-tanh-above-half"

    def patches(self) -> Any:
        def wrap(vjp: Any, ctx: Any, op: Any, cts: Any, needed: Any) -> Any:
            return (
                [ctx.scale(v, scale=2.0) for v in vjp(ctx, op, cts, needed)]
                if self.above
                else vjp(ctx, op, cts, needed)
            )

        return vjp_wrapped("tanh", wrap)

    def before(self, case: Case) -> Case:
        tanh_inputs = [k for k, v in enumerate(case.program.inputs) if any(u.name == "tanh" for u in v.uses)]
        self.above = any(float(np.max(case.inputs[k])) > 0.5 for k in tanh_inputs)
        return case


class WrongSinAndTanhAboveHalf(WrongTanhAboveHalf):
    """WrongTanhAboveHalf, and sin's rule wrong everywhere."""

    name = "wrong-sin-and-tanh-above-half"

    @contextmanager
    def patches(self) -> Iterator[None]:
        with WrongTanhAboveHalf.patches(self), WrongSinRule.patches(self):  # type: ignore[arg-type]
            yield


class CrashOnNesting(Mutant):
    """Aborts the process on nested control flow."""

    name = "crash-on-nesting"

    def before(self, case: Case) -> Case:
        if any(op.name in ("if", "while") and op.parent is not case.program.block for op in case.program.walk()):
            os.abort()
        return case


class CrashOnThirdCase(Mutant):
    """Aborts the process at the third case it runs, whatever the case: native code left damaged
    by the cases before (Paddle's finding 18). Not in MUTANTS: no case of it is wrong."""

    name = "crash-on-third-case"
    ran = 0

    def before(self, case: Case) -> Case:
        CrashOnThirdCase.ran += 1
        if CrashOnThirdCase.ran == 3:
            os.abort()
        return case


class HangOnIf(Mutant):
    name = "hang-on-if"

    def before(self, case: Case) -> Case:
        if any(op.name == "if" for op in case.program.walk()):
            time.sleep(3600)
        return case


class _ZerosWhereOpIs(Mutant):
    """Zeros, not None, for an input that reaches no output, in programs with a `block_op`."""

    block_op = ""

    def after(self, r: BackendResult, case: Case) -> BackendResult:
        if any(op.name == self.block_op for op in case.program.walk()):
            r.grads = [np.zeros_like(case.inputs[i]) if g is None else g for g, i in zip(r.grads, case.wrt)]
        return r


class ZerosForUnreachableInLoops(_ZerosWhereOpIs):
    """... in programs with a loop: a known defect of `KnownAndNewInLoops` (as Paddle's inputs of
    dead loop-body ops)."""

    name = "zeros-for-unreachable-in-loops"
    block_op = "while"


class WrongExpRule(Mutant):
    """d exp(x) = 2 exp(x)."""

    name = "wrong-exp-rule"

    def patches(self) -> Any:
        return vjp_wrapped(
            "exp", lambda vjp, ctx, op, cts, needed: [ctx.scale(v, scale=2.0) for v in vjp(ctx, op, cts, needed)]
        )


class KnownAndNewInLoops(ForgetLoopAccumulation):
    """Two wrong values in loop programs: `exp`'s rule, on file as known (tests/known/), and a new
    one, the accumulation of a captured value's cotangent across trips forgotten."""

    name = "known-and-new-in-loops"

    @contextmanager
    def patches(self) -> Iterator[None]:
        with ForgetLoopAccumulation.patches(self), WrongExpRule.patches(self):  # type: ignore[arg-type]
            yield


class ZerosInIfs(_ZerosWhereOpIs):
    """... in programs with an `if`."""

    name = "zeros-in-ifs"
    block_op = "if"


class WrongTanhRule(Mutant):
    """d tanh(x) = 2 (1 - tanh(x)^2)."""

    name = "wrong-tanh-rule"

    def patches(self) -> Any:
        return vjp_wrapped(
            "tanh", lambda vjp, ctx, op, cts, needed: [ctx.scale(v, scale=2.0) for v in vjp(ctx, op, cts, needed)]
        )


class KnownAndNewInIfs(Mutant):
    """Two wrong values in `if` programs: `tanh`'s rule, on file as known (tests/known/), and a new
    one: the rule of every unary elementwise op is negated where the op lies inside a branch."""

    name = "known-and-new-in-ifs"

    @contextmanager
    def patches(self) -> Iterator[None]:
        def wrap(vjp: Any, ctx: Any, op: Any, cts: Any, needed: Any) -> Any:
            out = vjp(ctx, op, cts, needed)
            return [ctx.neg(v) for v in out] if op.parent is not None and op.parent.label in ("then", "else") else out

        with ExitStack() as stack:
            for name in [n for n, o in OPS.items() if o.drawing.family == "unary"]:
                stack.enter_context(vjp_wrapped(name, wrap))
            stack.enter_context(WrongTanhRule.patches(self))  # type: ignore[arg-type]
            yield


class KnownAndNewInIfsFixed(WrongTanhRule):
    """KnownAndNewInIfs with its new defect fixed: only its known one left."""

    name = "known-and-new-in-ifs"


class KnownAndNewInIfsRegressed(KnownAndNewInIfs):
    """KnownAndNewInIfs with one more defect (a regression): an unused `full_like` left behind."""

    name = "known-and-new-in-ifs-regressed"

    @contextmanager
    def patches(self) -> Iterator[None]:
        with KnownAndNewInIfs.patches(self), UnusedFullLike.patches(self):  # type: ignore[arg-type]
            yield


class RefuseZeroTrip(ReferenceBackend):
    """Declares `while`, yet refuses every loop that runs no trip."""

    name = "refuse-zero-trip"

    def run(self, case: Case) -> BackendResult:
        from gradcert.backends.protocol import Unsupported
        from gradcert.reference.interpreter import Interpreter

        trace = Interpreter().run(case.program, list(case.inputs)).trace
        if any(op.name == "while" and trips == 0 for op, trips in trace):
            raise Unsupported("zero-trip loops are not supported")
        return super().run(case)


class Flaky(Mutant):
    """Every other answer, in no pattern, is off by a relative 1e-3 (a race in a thread pool)."""

    name = "flaky"

    def after(self, r: BackendResult, case: Case) -> BackendResult:
        if random.random() < 0.5:
            r.grads = [None if g is None else g * (1 + 1e-3) for g in r.grads]
        return r


class Slow(ReferenceBackend):
    """A correct backend that takes a tenth of a second a case (runs to interrupt)."""

    name = "slow"

    def run(self, case: Case) -> BackendResult:
        time.sleep(0.1)
        return super().run(case)


class NoLoops(ReferenceBackend):
    """A correct backend that declares no `while`: it must never be asked for one."""

    name = "no-loops"
    capabilities = ReferenceBackend.capabilities - {"while"}

    def run(self, case: Case) -> BackendResult:
        if any(op.name == "while" for op in case.program.walk()):
            raise AssertionError("asked for a loop although `while` is not among its capabilities")
        return super().run(case)


class KillsItsWorkerOnce(ReferenceBackend):
    """A correct backend whose process is killed (SIGKILL) at the first case holding a `sin` (a
    worker lost to the kernel's OOM killer, say): run in process by a Ray worker, it takes that
    worker down once. The case's text goes to the file `GRADCERT_TEST_MARKER` names first. Not in
    MUTANTS: no case of it is wrong."""

    name = "kills-its-worker-once"

    def run(self, case: Case) -> BackendResult:
        marker = Path(os.environ["GRADCERT_TEST_MARKER"])
        if "sin(" in case.to_text() and not marker.exists():
            marker.write_text(case.to_text())
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run(case)


def kills(case: Case) -> bool:
    """Whether `KillsEveryWorker` dies on `case`: about one case in sixteen, the same every time."""
    return hashlib.sha256(case.to_text().encode()).digest()[0] < 16


class KillsEveryWorker(ReferenceBackend):
    """A correct backend whose process is killed at every case `kills` picks: each such case kills
    any worker that runs it, so it is a `crash`."""

    name = "kills-every-worker"

    def run(self, case: Case) -> BackendResult:
        if kills(case):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run(case)


MUTANTS = [
    DropFanout,
    ZeroFillOnes,
    IgnoreCotangents,
    IgnoreNoGrad,
    IgnoreStopGradient,
    SwapIfBranches,
    ForgetLoopAccumulation,
    ReadOverwritten,
    UnusedFullLike,
    ZerosForUnreachable,
    RelativeError,
    WrongSinRule,
    CrashOnNesting,
    HangOnIf,
    KnownAndNewInLoops,
    KnownAndNewInIfs,
]


# --- defects that live where two features meet (generators/coverage.py's pairs) ------------------
# Each is right everywhere but in one interaction of two cells: an op family in one context, a
# flag on a value defined inside a body, a loop of many trips, a shape op at a high rank. A
# certify run must draw that pair to catch it (tests/conformance/test_mutants.py: INTERACTIONS).


def _regions(op: Any) -> list[str]:
    """The kinds of region `op` sits in, innermost first ("then"/"else" of an if, "body" of a while)."""
    out, block = [], op.parent
    while block is not None and block.parent is not None:
        out.append(block.label)
        block = block.parent.parent
    return out


class _NegatedWhere(Mutant):
    """The gradients of ops named `ops` negated where `where(op)` holds."""

    ops: tuple[str, ...] = ()

    def where(self, op: Any) -> bool:
        raise NotImplementedError

    def patches(self) -> Any:
        def wrap(vjp: Any, ctx: Any, op: Any, cts: Any, needed: Any) -> Any:
            out = vjp(ctx, op, cts, needed)
            return [ctx.neg(v) if v is not None and self.where(op) else v for v in out]

        stack = ExitStack()
        for name in self.ops:
            stack.enter_context(vjp_wrapped(name, wrap))
        return stack


class ReductionInLoopBody(_NegatedWhere):
    """reduction x while: a sum's or mean's gradient is wrong inside a loop body."""

    name = "reduction-in-loop-body"
    ops = ("sum", "mean")

    def where(self, op: Any) -> bool:
        return "body" in _regions(op)


class InplaceInBranch(_NegatedWhere):
    """inplace x if: an in-place op's gradient is wrong inside an `if` branch."""

    name = "inplace-in-branch"
    ops = tuple(n for n, d in OPS.items() if d.autodiff.inplace_of is not None)

    def where(self, op: Any) -> bool:
        return bool(_regions(op)) and _regions(op)[0] in ("then", "else")


class BroadcastInLoop(_NegatedWhere):
    """broadcast x while: a broadcasting binary op's gradient is wrong inside a loop body."""

    name = "broadcast-in-loop"
    ops = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "pow")

    def where(self, op: Any) -> bool:
        return "body" in _regions(op) and len({v.type.shape for v in op.operands}) > 1


class ShapeOpAtRank4(_NegatedWhere):
    """shape x rank 4: a shape op's gradient is wrong where it reads a rank-4 tensor."""

    name = "shape-op-at-rank-4"
    ops = ("reshape", "transpose", "slice", "pad", "expand", "squeeze", "unsqueeze")

    def where(self, op: Any) -> bool:
        return op.operands[0].type.rank == 4


class TransposeByItsPerm(Mutant):
    """shape x rank 3+: transpose's gradient transposes by `perm`, not its inverse; right at rank 2,
    where every permutation is its own inverse."""

    name = "transpose-by-its-perm"

    def patches(self) -> Any:
        return vjp_wrapped(
            "transpose", lambda vjp, ctx, op, cts, needed: [ctx.transpose(cts[0], perm=op.attrs["perm"])]
        )


class StopGradientInBody(Mutant):
    """stop_gradient x while: a value marked stop_gradient inside a loop body lets gradients through."""

    name = "stop-gradient-in-body"

    def before(self, case: Case) -> Case:
        p, m = clone(case.program)
        for op in p.walk():
            if "body" in _regions(op):
                for r in op.results:
                    r.stop_gradient = False
        return replace(case, program=p, no_grad=[m[v] for v in case.no_grad])


class NoGradInBranch(Mutant):
    """no_grad x if: a no-grad value defined inside an `if` branch is not held."""

    name = "no-grad-in-branch"

    def before(self, case: Case) -> Case:
        keep = [v for v in case.no_grad if not (v.op is not None and _regions(v.op)[:1] in (["then"], ["else"]))]
        return replace(case, no_grad=keep)


class _NegatedForLoops(Mutant):
    """Every gradient negated where the case has a loop whose trip count is in `bucket`."""

    bucket = ""

    def after(self, r: BackendResult, case: Case) -> BackendResult:
        from gradcert.generators.coverage import _trip_bucket

        if any(op.name == "while" and _trip_bucket(op) == self.bucket for op in case.program.walk()):
            r.grads = [None if g is None else -g for g in r.grads]
        return r


class LongLoops(_NegatedForLoops):
    """while x 4-8 trips: the adjoint of a loop of more than 3 trips is wrong."""

    name = "long-loops"
    bucket = "4-8"


class DataDependentTrips(_NegatedForLoops):
    """while x data: the adjoint of a loop whose trip count a float condition decides is wrong."""

    name = "data-dependent-trips"
    bucket = "data"


INTERACTION_MUTANTS = [
    ReductionInLoopBody,
    InplaceInBranch,
    BroadcastInLoop,
    ShapeOpAtRank4,
    TransposeByItsPerm,
    StopGradientInBody,
    NoGradInBranch,
    LongLoops,
    DataDependentTrips,
]


class KillsEveryCase(ReferenceBackend):
    """A correct backend whose process is killed (SIGKILL) at every case it is asked: every case
    is a `crash` (the crash-heavy throughput of `bench/crashes.py`). Not in MUTANTS: no case of
    it is wrong."""

    name = "kills-every-case"

    def run(self, case: Case) -> BackendResult:
        os.kill(os.getpid(), signal.SIGKILL)
        return super().run(case)
