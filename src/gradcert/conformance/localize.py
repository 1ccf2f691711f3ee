"""Localization: the smallest part of a failing case's program whose gradient is wrong.

A failing case names where a test stood; a defect is what is wrong in the backend. To tell them
apart, a failing case's program is cut into derived cases -- each run through the same backend by
the Backend protocol alone, judged by the same oracles -- and the smallest one that fails the same
way names the culprit. The phases, smallest culprit first:

1. **Outputs that are inputs** (`return %x`): nothing but the request.
2. **One op**, on the operand values the case's run gave it (the first time it ran: a loop body's
   op on its first trip's values), its results differentiated with respect to its operands under
   random cotangents. An op whose operands are a vector comes with the `combine` that makes it.
   A failing op is then told apart from a use it was put to (`refine`): the same use with other
   ops of its family (a value read twice, in place, a stop-gradient value, the no-grad set)
   failing too makes the use the culprit; plain ops failing too make it every op (or the explicit
   cotangents, where the default ones pass); the op without a use (distinct operands, its
   out-of-place form) failing drops that use from its name.
3. **One region** (`if`, `while`), innermost first, with its operands and what its blocks read
   as inputs (an `if` with the ops that compute only its condition): a branch's backward, a
   captured value's accumulation across a loop's trips, a loop-carried value and its stack.
4. **A value's fan-out**: the ops that read one value, together: the accumulation of its
   cotangents (`add`, or `add_n` for three or more).
5. **A window** of up to `WINDOW` consecutive top-level ops, shortest first: what needs several
   ops to fail (two loops one after the other, say); named by its ops, or by the mechanism where
   one of them overwrites in place a value another uses, or by the no-grad set or the
   stop_gradient flags where it passes without them (a region or a fan-out: with them).

A use an op fails without (its no-grad set, say) is the culprit where one other op of its family
fails the same way in it: a mechanism some ops' backward meets; a plain rule only where the
others all fail too (two ops with wrong rules are two defects).

For a failure of a value (not an exception or a crash, which the forward program may raise
anywhere) only ops and regions on a path from a differentiated input to a differentiated output
are cut out: an op off every path gets no backward.

"Fails the same way" is the same kind of discrepancy (`defects.kind`, without the role of the
wrong inputs): a wrong value, a gradient where none belongs, an exception of one type and message,
a crash. A derived case that fails another way shows another defect and tells nothing of this
one; one the backend refuses is no evidence either way. A case none of whose derived cases fails
the same way is not localized, and keeps the signature of where it was met.

At the second order, a derived case whose first order fails too is shown by its first order; one
whose first order passes is looked for among the ops of its first-order program (the reference's
backward of it) at the first order -- a wrong `sin` rule met through `cos`'s backward is `sin`'s
-- and else tagged `[second order]`. A float32 case whose float64 twin passes is tagged `[float32]`.

Cost: a search spends at most `budget` backend calls. Derived cases are cached by structure (the
program's text with its values and sizes left out, and the area it was met in: a backend answers
a structure alike in every area): one that failed before is tried first (a case
of a cause met already is localized in a call or two) and run again on this case's values, so
that a value-dependent failure of one op never takes the blame for another op's bug; one that
passed at non-degenerate values is taken to pass, and a case that finds nothing so is searched
again without that trust. The phases where a kind's culprits were found before are tried first;
a region or window found before its ops were tried is named by one of them that fails alone (a
window's ops each judged at its values, a region's by the pass cache, as in the ops phase: a
region holds many ops, and judging each again would cost more than the rest of the search).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from gradcert.generators.case import Case
from gradcert.reference.autodiff.gradients import first_order
from gradcert.reference.interpreter import Interpreter, to_numpy
from gradcert.reference.ir import Block, Operation, Program, Value, captures, clone
from gradcert.reference.ir.printer import print_program
from gradcert.reference.ir.types import TensorType, VectorType, is_differentiable, xp_dtype
from gradcert.reference.ir.verifier import verify
from gradcert.reference.ops import OPS

# a derived case's answer where it passes (or cannot be judged)
PASSED = ""

# a derived case's judgement: the kind of its failure (or PASSED) and its wrong inputs
Probe = Callable[[Case], tuple[str, list[str]]]

# the ops a failing op's use is tried with, by (family, in place): where they fail too, the use
# (or every op), not the op, is the culprit
_ALTERNATIVES = {
    ("unary", False): ("tanh", "sin", "sigmoid"),
    ("unary", True): ("tanh_", "sin_", "sigmoid_"),
    ("binary", False): ("multiply", "add", "subtract"),
    ("binary", True): ("multiply_", "add_", "subtract_"),
}

# what a use names when it is the culprit, not the op
USES = {
    "repeated operand": "a value read twice by one op",
    "in place": "an in-place op",
    "broadcasting": "broadcasting",
    "stop_gradient operand": "a stop_gradient value",
    "stop_gradient result": "a stop_gradient value",
    "no-grad set": "the no-grad set",
    "explicit cotangents": "explicit cotangents (grad_outputs)",
}

# the phases of a search, smallest culprit first; windows of consecutive ops up to WINDOW long
PHASES = ("outputs", "ops", "regions", "fanouts", "windows")
WINDOW = 3

# ops never probed alone: constants, terminators, forward-only bookkeeping
_SKIP = {"full", "yield", "combine"}


@dataclass
class Cause:
    """Where a failing case's defect lives: `culprit` (an op and how it is used, or a construct),
    and the derived case that shows it alone (the defect's minimal case)."""

    culprit: str
    case: Case
    probes: int = 0  # backend calls spent finding it


@dataclass
class Cache:
    """Probe answers by structure, and refined culprits, for one backend (one session)."""

    passed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    culprits: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # kind -> how often each phase found its culprit: the phases tried first for that kind
    phases: dict[str, collections.Counter[str]] = field(default_factory=dict)


def localize(case: Case, kind: str, probe: Probe, cache: Cache | None = None, budget: int = 24) -> Cause | None:
    """The culprit of `case`'s failure of `kind` (without its role), by at most `budget` derived
    cases run through `probe`; None where no derived case fails the same way."""
    try:
        cut = _Cutter(case, kind)
    except Exception:  # the reference cannot run it: nothing to cut at
        return None
    return _Search(cut, kind, probe, cache or Cache(), budget).search()


class _Search:
    def __init__(self, cut: _Cutter, kind: str, probe: Probe, cache: Cache, budget: int) -> None:
        self.cut, self.kind, self._probe, self.cache, self.budget = cut, kind, probe, cache, budget
        self.calls = 0
        self.trust, self.skipped = True, 0  # structures that passed before are taken to pass
        self.last_wrong: list[str] = []  # the wrong inputs of the last derived case judged

    def search(self) -> Cause | None:
        """`run`, and where it finds nothing while structures that passed before were taken to
        pass, `run` again judging them on this case's values (a value-dependent failure)."""
        found = self.run()
        if found is None and self.skipped:
            self.trust, self.skipped = False, 0
            found = self.run()
        if found is None and not self.cut.explicit and self.kind.startswith("wrong value") and self.cut.free:
            # (a default cotangent of ones hides some wrong rules, a transpose's permutation: the
            # derived cases once more under random cotangents)
            self.cut.explicit = True
            found = self.run()
        return found

    def fails(self, derived: Case | None, spend: bool = True, trust: bool = True) -> bool:
        """Whether `derived` fails the way the case does (cached by structure: see the module).
        `spend`: counts against the budget (the search for a culprit does; naming a found one
        does not: it is bounded by its own few variations); `trust`: a structure that passed
        before is taken to pass."""
        return self.answer(derived, spend, trust) is True

    def answer(self, derived: Case | None, spend: bool = True, trust: bool = True) -> bool | None:
        """True where `derived` fails the way the case does, False where it passes, None where it
        tells nothing: it fails another way (another defect), is refused, or is not run."""
        if derived is None or (spend and self.calls >= self.budget):
            return None
        key = _structure(derived)
        if trust and self.trust and key in self.cache.passed:
            self.skipped += 1
            return False
        self.calls += 1
        got, self.last_wrong = self._probe(derived)
        if got == self.kind:
            self.cache.failed.add(key)
            return True
        if got == PASSED:
            # (a pass at degenerate values, exact zeros, is no pass of the structure: sin' at 0)
            if all(np.all(x != 0) for x in derived.inputs):
                self.cache.passed.add(key)
            return False
        return None

    def all_fail(self, derived: Sequence[Case | None], least: int, some: bool = False) -> bool:
        """Whether none of `derived` passes and at least `least` fail the way the case does (one
        that fails another way shows another defect, and tells nothing of this one); `some`: at
        least `least` fail, whatever the others do."""
        answers = [self.answer(d, spend=False) for d in derived]
        return (some or False not in answers) and answers.count(True) >= least

    def run(self, phases: Sequence[str] = PHASES) -> Cause | None:
        """The first derived case of `phases` that fails as the case does: those whose structure
        failed before first (a case of a cause met already is localized in a call or two), then
        phase by phase, the phases where this kind's culprits were found most often first (else
        smallest first). A region or a run of ops found before the ops in it were tried is named
        by one of them where one fails alone: the culprit is the smallest part that fails."""
        listed = {p: list(self.candidates([p])) for p in phases if p != "windows"}
        tried = set()
        for p in listed:
            for d, name in listed[p]:
                if _structure(d) in self.cache.failed:
                    tried.add(id(d))
                    if self.fails(d):
                        return self.found(name, d)
        seen = self.cache.phases.setdefault(self.kind, collections.Counter())
        for p in sorted(phases, key=lambda p: (-seen[p], PHASES.index(p))):
            for d, name in listed[p] if p in listed else self.candidates([p]):
                if id(d) in tried or not self.fails(d):
                    continue
                seen[p] += 1
                wrong = self.last_wrong  # (what names a region's construct)
                if PHASES.index(p) > PHASES.index("ops") and "ops" in phases:
                    inside = list(self.cut.ops(within=d))
                    # (the ops of a small part each judged at these values: the part they make up
                    # fails; those of a large part, a region, by the pass cache, as in the ops phase)
                    small = len(inside) <= WINDOW
                    for op in inside:
                        one = self.cut.single(op)
                        if one is not None and self.fails(one, trust=not small):
                            return self.found(functools.partial(self.refine, op), one)
                self.last_wrong = wrong
                return self.found(name, d)
        return None

    def candidates(self, phases: Sequence[str]) -> Iterator[tuple[Case, Callable[[Case], str]]]:
        """The derived cases of `phases`, in order, each with what names its culprit from it."""
        cut = self.cut
        out: Iterable[tuple[Case | None, Callable[[Case], str]]] = ()
        if "outputs" in phases:
            out = itertools.chain(out, ((cut.window([], [x]), self.passed_through) for x in cut.passed_through()))
        if "ops" in phases:
            out = itertools.chain(out, ((cut.single(op), functools.partial(self.refine, op)) for op in cut.ops()))
        if "regions" in phases:
            inner_first = sorted(cut.regions(), key=_depth, reverse=True)
            out = itertools.chain(out, ((cut.region(op), functools.partial(self.construct, op)) for op in inner_first))
            fed = ((cut.fed(op), _named(f"{op.name} reading values other ops compute")) for op in inner_first)
            out = itertools.chain(out, fed)
        if "fanouts" in phases:
            out = itertools.chain(out, ((cut.window(users), _accumulation(users)) for _, users in cut.fanouts()))
        if "windows" in phases:
            top = [op for op in cut.case.program.block.ops if op.name not in _SKIP]
            spans = (top[k : k + n] for n in range(2, min(len(top), WINDOW) + 1) for k in range(len(top) - n + 1))
            out = itertools.chain(out, ((cut.window(w), _sequence(w)) for w in spans))
        return ((d, name) for d, name in out if d is not None)

    def found(self, name: Callable[[Case], str], derived: Case) -> Cause:
        """The cause shown by failing `derived`: at the second order, where its first order fails
        too, the first-order case shows and names it; where that passes, an op of its first-order
        program (the reference's backward of it) that fails alone at the first order is the
        culprit (a wrong rule met through another op's backward); else the culprit `name` gives,
        tagged with the order and dtype where only they fail."""
        wrong = self.last_wrong  # (a region's construct is named by the wrong inputs of its case)
        tags = []
        if derived.order == 2:
            first = self.cut.first(derived)
            if self.fails(first, spend=False):
                return self.found(name, first)
            inner = self.through_first_order(derived)
            if inner is not None:
                inner.probes = self.calls
                return inner
            tags.append("second order")
        if derived.dtype == "f32" and not self.fails(derived.widened(), spend=False):
            tags.append("float32")
        self.last_wrong = wrong
        culprit = name(derived)
        if not culprit.startswith(("op ", "a value", "an in-place", "every", "explicit", "the no-grad")):
            # a part of several ops with an in-place op over a value another uses or a loop carries,
            # which passes with every op out of place: that write is the culprit
            if (
                _overwriting(list(derived.program.block.ops))
                and self.answer(self.cut.out_of_place(derived), False) is False
            ):
                culprit = OVERWRITING
            elif culprit.startswith(_PARTS):
                culprit = self.flags(culprit, derived)
        return Cause(culprit + (f" [{', '.join(tags)}]" if tags else ""), derived, self.calls)

    def flags(self, culprit: str, derived: Case) -> str:
        """A failing part of several ops that passes without its no-grad set, or without its values'
        stop_gradient flags, is named by what it needs (a window by the use alone: the ops around a
        flagged value only carry it; a region or a fan-out with it)."""
        for use, plain in (
            ("no-grad set", dataclasses.replace(derived, no_grad=[]) if derived.no_grad else None),
            ("stop_gradient operand", self.cut.unflagged(derived)),
        ):
            if plain is not None and self.answer(plain, spend=False) is False:
                if culprit.startswith("ops "):
                    return USES[use]
                return f"{culprit} ({use.removesuffix(' operand')})"
        return culprit

    def through_first_order(self, derived: Case) -> Cause | None:
        """The culprit of second-order case `derived` among the ops and fan-outs of its first-order
        program, each judged alone at the first order."""
        if derived.no_grad:
            return None
        try:
            q, feeds = first_order(derived.program, derived.output_values, derived.wrt_values, derived.cotangents)
            case = Case(
                q,
                [*derived.inputs, *feeds],
                list(range(len(q.outputs))),
                derived.wrt,
                derived.cotangents2,
                [],
                derived.area,
            )
            inner = _Search(_Cutter(case, self.kind), self.kind, self._probe, self.cache, self.budget)
        except Exception:
            return None
        inner.calls = self.calls
        found = inner.run(("ops", "fanouts"))
        self.calls = inner.calls
        return found

    # --- naming -------------------------------------------------------------------------------
    def plain(self, derived: Case) -> list[Case | None]:
        """Plain `tanh`, `sin` and `multiply` on `derived`'s first input, without its uses."""
        return [self.cut.unary(derived, "tanh", False), self.cut.unary(derived, "sin", False), self.cut.binary(derived)]

    def passed_through(self, derived: Case) -> str:
        """The culprit of a failing case whose output is its input: that, or every op where plain
        ops on the same input fail the same way."""
        if self.all_fail(self.plain(derived), 2):
            return "every op"
        x = derived.program.inputs[0]
        uses = [w for w, on in (("in the no-grad set", derived.no_grad), ("stop_gradient", x.stop_gradient)) if on]
        return "an input returned as an output" + (f" ({', '.join(uses)})" if uses else "")

    def refine(self, op: Operation, derived: Case) -> str:
        """The culprit of a failing one-op case: the op with the uses its failure needs, or the use
        itself where other ops fail the same way in it."""
        uses = self.cut.uses(op, derived)
        # (by the derived case's structure: which operand is flagged or in the no-grad set tells
        # whether the use is needed, and an op's name and uses alone do not say which)
        key = (_structure(derived), ",".join(uses), self.kind)
        if key in self.cache.culprits:
            return self.cache.culprits[key]
        culprit = self._refine(op, derived, uses)
        self.cache.culprits[key] = culprit
        return culprit

    def _refine(self, op: Operation, derived: Case, uses: list[str]) -> str:
        d = OPS[op.name]
        inplace = d.autodiff.inplace_of is not None
        others = [n for n in _ALTERNATIVES.get((d.drawing.family, inplace), ()) if n != op.name]
        if "repeated operand" in uses:  # (x - x and x / x have gradients that no cotangent changes)
            others = [n for n in others if n.rstrip("_") not in ("subtract", "divide")]
        others = others[:2]
        if others:  # the same use with other ops of the family
            alternatives = [self.cut.renamed(derived, n) for n in others]
        elif "repeated operand" in uses:  # no op of the family takes its place: binary ops reading one value twice
            alternatives = [self.cut.twice(derived, n) for n in ("multiply", "add")]
        else:  # ... plain unary ops on its first operand
            alternatives = [self.cut.unary(derived, n) for n in ("tanh", "sin")]
        needed, shown = [], []  # (shown: the op passes without it; a use that cannot be taken away is kept unshown)
        for use in uses:
            plain = self.cut.without_use(derived, use)
            if plain is None or not self.fails(plain, spend=False):
                needed.append(use)
                shown += [use] if plain is not None else []
        # (a use the op fails without: shared where one other op fails the same way in it, as a
        # mechanism of the use that some ops' backward meets and others' does not; a plain rule:
        # only where the others all fail too, since two ops with wrong rules are two defects)
        if self.all_fail(alternatives, 1 if shown else max(1, len(alternatives) - 1), some=bool(shown)):
            # not the op's rule: something every op meets (plain ops, with none of its uses, fail
            # too), the uses it needs, or every op of its family
            if self.all_fail(self.plain(derived), 2):
                if derived.cotangents is not None and not self.fails(self.cut.without_cotangents(derived), spend=False):
                    return USES["explicit cotangents"]
                return "every op"
            named = list(dict.fromkeys(USES[u] for u in needed))
            return " and ".join(named) if named else f"every {d.drawing.family} op"
        name = d.autodiff.base if inplace and "in place" not in needed and d.autodiff.base else op.name
        return f"op {name}" + (f" ({', '.join(needed)})" if needed else "")

    def construct(self, op: Operation, derived: Case) -> str:
        """A failing region's construct: a branch, or a loop and which of its inputs' gradients
        are wrong (captured by its body: their accumulation across trips; carried: their stack).
        The regions nested in it are not named: the innermost region that fails alone is found
        first, so a failing outer one needs its own construct."""
        carried, captured = self.cut.region_roles(op, derived)
        wrong = set(self.last_wrong)
        if op.name != "while":  # (a branch's wrong inputs are all values it reads)
            return op.name
        # (a captured value's error reaches the carried ones, not the other way)
        if wrong & captured:
            return f"{op.name}: a captured value's accumulation across trips"
        return f"{op.name}: a loop-carried value" if wrong & carried else op.name


def _named(culprit: str) -> Callable[[Case], str]:
    return lambda _: culprit


def _accumulation(users: Sequence[Operation]) -> Callable[[Case], str]:
    how = "add_n of three or more" if len(users) >= 3 else "add of two"
    return _named(f"accumulation of a value read by several ops ({how})")


def _sequence(ops: Sequence[Operation]) -> Callable[[Case], str]:
    return _named("ops " + " ".join(o.name for o in ops))


OVERWRITING = "an in-place op overwriting a value another op uses"

# the culprits that name a part of several ops (a window, a region, a fan-out), not a use
_PARTS = ("ops ", "if", "while", "accumulation of")


def _overwriting(ops: Sequence[Operation]) -> str:
    """The mechanism of ops one of which (at any depth) overwrites in place a value another uses or
    computed, or a loop carries (a backward that needs the value as it was: saved, or read after
    the write), or ""."""
    inside = [o for op in ops for o in op.walk()]
    for op in inside:
        k = OPS[op.name].autodiff.inplace_of
        if k is None:
            continue
        v = op.operands[k]
        carried = isinstance(v.owner, Block) and v.owner.parent is not None
        if carried or any(o is not op and (v in o.operands or v in o.results) for o in inside):
            return OVERWRITING
    return ""


def _depth(op: Operation) -> int:
    n, b = 0, op.parent
    while b is not None and b.parent is not None:
        n, b = n + 1, b.parent.parent
    return n


def _structure(case: Case) -> str:
    """A derived case without its values and sizes (a dimension of 1, which broadcasts, kept):
    what the cache keys."""
    text = _DIMS.sub(
        lambda m: m[1] + "[" + ",".join("1" if d.strip() == "1" else "n" for d in m[2].split(",") if d.strip()) + "]",
        print_program(case.program),
    )
    # (the area is where a test stood, not a structure; append_backward's request is one of its own:
    # one loss whose inputs are parameters, which a backend may answer through another entry point)
    entry = case.area == "append_backward"
    return f"{entry}|{case.order}|{len(case.no_grad)}|{case.cotangents is None}|{text}"


_DIMS = re.compile(r"\b(f64|f32|f16|bf16|i64|i32|bool)\[([^\]]*)\]")


class _Cutter:
    """Derived cases of one case: its values at every point of its run, and programs cut from it."""

    def __init__(self, case: Case, kind: str = "") -> None:
        self.case = case
        program = case.program
        every = [*program.inputs]
        for op in program.walk():
            every += op.results
            for b in op.blocks:
                every += b.args
        every = [v for v in every if isinstance(v.type, TensorType)]  # (a derived case's inputs are tensors)
        interp = Interpreter(record=False, keep=frozenset(every))
        interp.run(program, [np.array(x, copy=True) for x in case.inputs])
        self.values: dict[Value, np.ndarray] = {v: to_numpy(xs[0]) for v, xs in interp.kept.items() if xs}
        self.rng = np.random.default_rng(int(case.id, 16))
        self.made: dict[int, list[Operation]] = {}  # a derived case (by id) -> the ops it was cut from
        # derived cases ask for gradients under random cotangents where the case gives its own, and
        # under the default ones where it does not (a zero-fill of the default cotangent left
        # behind shows only so); never where the API takes one loss (append_backward)
        self.free = case.area != "append_backward"  # (whether a request may give its cotangents)
        self.explicit = case.cotangents is not None and self.free
        # (a value's failure lies on a path: a wrong value, None or a gradient where it does not
        # belong, a broken invariant of the backward program)
        self.paths = None if kind.startswith("raised") or kind in ("crash", "refused") else self._paths()

    # --- what to cut ----------------------------------------------------------------------------
    def ops(self, within: Case | None = None) -> Iterable[Operation]:
        """Every op that computes, in program order (top level first, then inside regions); `within`:
        of the ops a derived case was cut from, those and the ops inside them."""
        program = self.case.program
        if within is not None:
            made = [o for op in self.made.get(id(within), []) for o in op.walk()]
            yield from self._probeable([o for o in made if not o.blocks])
            return
        nested = []
        for op in program.block.ops:
            if not op.blocks:
                yield from self._probeable([op])
            else:
                nested.append(op)
        for op in nested:
            yield from self._probeable([o for o in op.walk() if o is not op and not o.blocks])

    def _probeable(self, ops: Iterable[Operation]) -> Iterable[Operation]:
        for op in ops:
            d = OPS[op.name]
            if op.name in _SKIP or d.autodiff.forward_only or d.execution.effects or not self.on_path(op):
                continue
            if any(is_differentiable(r.type) for r in op.results):
                yield op

    def on_path(self, op: Operation) -> bool:
        """Whether `op` may lie on a path from a differentiated input to a differentiated output
        (over-approximated: a region's every inner value counts once any of its results does); an
        op off every path gets no backward, so no wrong gradient is its. Where the failure may
        arise in the forward program (an exception, a crash), every op counts."""
        if self.paths is None:
            return True
        fwd, bwd = self.paths
        reads = [*op.operands, *captures(op.blocks)]
        return any(v in fwd for v in reads) and any(r in bwd for r in op.results)

    def _paths(self) -> tuple[set[Value], set[Value]]:
        program = self.case.program
        walk = list(program.walk())
        fwd: set[Value] = set(self.case.wrt_values)
        for _ in range(2):  # (a loop's carried values: the second pass sees what its trips carry)
            for op in walk:
                if any(v in fwd for v in [*op.operands, *captures(op.blocks)]):
                    fwd.update(op.results)
                    fwd.update(a for b in op.blocks for a in b.args)
                if op.name == "yield" and op.parent is not None and op.parent.parent is not None:
                    region = op.parent.parent
                    if any(v in fwd for v in op.operands):
                        fwd.update(region.results)
                        fwd.update(a for b in region.blocks for a in b.args)
        bwd: set[Value] = set(self.case.output_values)
        for _ in range(2):
            for op in reversed(walk):
                if any(r in bwd for r in op.results):
                    bwd.update(op.operands)
                    for inner in (o for b in op.blocks for o in b.walk()):
                        bwd.update(inner.operands)
                        bwd.update(inner.results)
                    bwd.update(a for b in op.blocks for a in b.args)
        return fwd, bwd

    def passed_through(self) -> list[Value]:
        """The differentiated outputs that are the program's inputs themselves."""
        program = self.case.program
        return list(
            dict.fromkeys(v for v in self.case.output_values if v in program.inputs and is_differentiable(v.type))
        )

    def regions(self) -> list[Operation]:
        return [op for op in self.case.program.walk() if op.blocks and self.on_path(op)]

    def fanouts(self) -> Iterable[tuple[Value, list[Operation]]]:
        """Top-level values read by two or more top-level ops (or twice by one), with their readers."""
        block = self.case.program.block
        for v in [*block.args, *(r for op in block.ops for r in op.results)]:
            users = [u for u in dict.fromkeys(v.uses) if u.parent is block and u.name != "yield"]
            users.sort(key=block.ops.index)
            reads = sum(u.operands.count(v) for u in users)
            if is_differentiable(v.type) and reads >= 2 and len(users) >= 2 and sum(map(self.on_path, users)) >= 2:
                yield v, users

    # --- derived cases -------------------------------------------------------------------------
    def single(self, op: Operation) -> Case | None:
        ops = [op]
        for v in op.operands:  # a vector operand comes with the combine that makes it
            if isinstance(v.type, VectorType) and v.op is not None and v.op.name == "combine":
                ops.insert(0, v.op)
        return self.window(ops)

    def region(self, op: Operation) -> Case | None:
        """The region op alone, with the ops that compute only its branch condition (they are its
        bookkeeping, not differentiated: a condition computed in the program, not fed)."""
        ops = [op]
        block = op.parent
        if op.name == "if" and block is not None:
            wanted = {op.operands[0]}
            for o in reversed(block.ops[: block.ops.index(op)]):
                if o.results and all(r in wanted and all(u in ops for u in r.uses) for r in o.results):
                    ops.insert(0, o)
                    wanted.update(o.operands)
        return self.window(ops)

    def fed(self, op: Operation) -> Case | None:
        """The region op with the ops of its block that compute what it reads (where the region
        alone, its reads fed as inputs, passes and the program fails: a region whose operands
        come from other ops); None where no op of its block computes one."""
        block = op.parent
        if block is None:
            return None
        reads = {*op.operands, *captures(op.blocks)}
        producers = [o for o in block.ops[: block.ops.index(op)] if any(r in reads for r in o.results)]
        return self.window([*producers, op]) if producers else None

    def window(self, ops: Sequence[Operation], extra: Sequence[Value] = ()) -> Case | None:
        """The case of `ops` (one block's, in order) alone: the values they read from elsewhere as
        inputs, at what the case's run gave them; their results read elsewhere (or, where none
        is, all of them) as outputs, differentiated under random cotangents."""
        inside: set[Value] = set()
        reads: dict[Value, None] = dict.fromkeys(extra)
        for op in ops:
            for v in [*op.operands, *captures(op.blocks)]:
                if v not in inside:
                    reads.setdefault(v, None)
            inside.update(op.results)
        if any(not isinstance(v.type, TensorType) or v not in self.values for v in reads):
            return None
        chosen = set(ops)
        results = [r for op in ops for r in op.results if is_differentiable(r.type) and isinstance(r.type, TensorType)]
        outs = [r for r in results if r in self.case.program.outputs or any(u not in chosen for u in r.uses)]
        outs = [*extra, *(outs or results)]
        if not outs:
            return None
        program = Program()
        values: dict[Value, Value] = {}
        for k, v in enumerate(reads):
            new = Value(v.type, f"x{k}", v.stop_gradient)
            new.owner = program.block
            program.block.args.append(new)
            values[v] = new
        for op in ops:
            program.block.append(_copy(op, values))
        program.outputs = [values[r] for r in outs]
        inputs = [np.array(self.values[v], copy=True) for v in reads]
        derived = self.request(program, inputs, [values[v] for v in self.case.no_grad if v in values])
        if derived is not None:
            self.made[id(derived)] = list(ops)
        return derived

    def request(self, program: Program, inputs: list[np.ndarray], no_grad: list[Value]) -> Case | None:
        case = self.case
        try:
            verify(program)
        except Exception:
            return None
        outputs = list(range(len(program.outputs)))
        if case.area == "append_backward":  # (one loss, its default cotangent)
            outputs = outputs[-1:]
        wrt = [k for k, v in enumerate(program.inputs) if is_differentiable(v.type)]
        if not wrt:
            return None
        cotangents = None
        if self.explicit:
            cotangents = [self._normal(program.outputs[i]) for i in outputs]
        derived = Case(program, inputs, outputs, wrt, cotangents, no_grad, case.area)
        return self.second(derived) if case.order == 2 else derived

    def second(self, derived: Case) -> Case | None:
        """`derived` at the second order, with random second cotangents."""
        try:
            q, _ = first_order(
                derived.program, derived.output_values, derived.wrt_values, derived.cotangents, derived.no_grad
            )
        except Exception:
            return None
        return dataclasses.replace(derived, order=2, cotangents2=[self._normal(v) for v in q.outputs], first_order=None)

    def first(self, derived: Case) -> Case:
        return dataclasses.replace(derived, order=1, cotangents2=None, first_order=None)

    def _normal(self, v: Value) -> np.ndarray:
        t = v.type
        assert isinstance(t, TensorType)
        return np.asarray(self.rng.standard_normal(t.shape), dtype=xp_dtype(np, t.dtype))

    # --- variations of a one-op case -----------------------------------------------------------
    def uses(self, op: Operation, derived: Case) -> list[str]:
        """How the op is used in its derived case."""
        d = OPS[op.name]
        dop = derived.program.block.ops[-1]
        out = []
        tensors = [v for v in dop.operands if isinstance(v.type, TensorType)]
        if len(set(_reads(dop))) < len(_reads(dop)):
            out.append("repeated operand")
        if d.drawing.family == "binary" and len({v.tensor.shape for v in tensors}) > 1:
            out.append("broadcasting")
        if d.autodiff.inplace_of is not None:
            out.append("in place")
        if any(v.stop_gradient for v in dop.operands):
            out.append("stop_gradient operand")
        if any(r.stop_gradient for r in dop.results):
            out.append("stop_gradient result")
        if derived.no_grad:
            out.append("no-grad set")
        return out

    def renamed(self, derived: Case, name: str) -> Case | None:
        """`derived` (one op) with the op replaced by `name`, its operands and their values kept."""
        program = derived.program
        dop = program.block.ops[-1]
        if dop.attrs and OPS[name].signature.attrs:
            return None
        values: dict[Value, Value] = {}
        new = Program()
        for v in program.inputs:
            values[v] = c = Value(v.type, v.name, v.stop_gradient)
            c.owner = new.block
            new.block.args.append(c)
        for op in program.block.ops[:-1]:
            new.block.append(_copy(op, values))
        try:
            results = [Value(r.type, None, r.stop_gradient) for r in dop.results]
            out = Operation(name, [values[v] for v in dop.operands], results)
            types = OPS[name].infer([v.type for v in out.operands], {}, [])
        except Exception:
            return None
        if types != [r.type for r in dop.results]:
            return None
        new.block.append(out)
        new.outputs = list(out.results)
        return self._again(derived, new)

    def unary(self, derived: Case, name: str, uses: bool = True) -> Case | None:
        """One `name` op on `derived`'s first differentiable input, its value kept; `uses`: with
        the stop_gradient flags and no-grad set of the op's use (else plain)."""
        program = derived.program
        # (the input a use is about first: a stop_gradient one, one in the no-grad set)
        able = [k for k, v in enumerate(program.inputs) if is_differentiable(v.type)]
        able.sort(key=lambda k: not (program.inputs[k].stop_gradient or program.inputs[k] in derived.no_grad))
        if not able:
            return None
        first = able[0]
        v = program.inputs[first]
        new = Program()
        x = Value(v.type, v.name, v.stop_gradient and uses)
        x.owner = new.block
        new.block.args.append(x)
        stopped = uses and any(r.stop_gradient for r in program.block.ops[-1].results)
        op = Operation(name, [x], [Value(v.type, None, stopped)])
        new.block.append(op)
        new.outputs = list(op.results)
        no_grad = [x] if uses and v in derived.no_grad else []
        if uses and any(r in derived.no_grad for r in program.block.ops[-1].results):
            no_grad.append(op.results[0])
        out = Case(
            new,
            [np.array(derived.inputs[first], copy=True)],
            [0],
            [0],
            None if derived.cotangents is None else [self._normal(op.results[0])],
            no_grad,
            derived.area,
        )
        return self.second(out) if derived.order == 2 else out

    def twice(self, derived: Case, name: str) -> Case | None:
        """Binary op `name` reading the value `derived`'s op reads twice, twice."""
        reads = _reads(derived.program.block.ops[-1])
        value = next((v for v in reads if reads.count(v) > 1), None)
        if value is None or value not in derived.program.inputs:
            return None
        k = derived.program.inputs.index(value)
        new = Program()
        x = Value(value.type, "x")
        x.owner = new.block
        new.block.args.append(x)
        op = Operation(name, [x, x], [Value(value.type)])
        new.block.append(op)
        new.outputs = list(op.results)
        out = Case(
            new,
            [np.array(derived.inputs[k], copy=True)],
            [0],
            [0],
            None if derived.cotangents is None else [self._normal(op.results[0])],
            [],
            derived.area,
        )
        return self.second(out) if derived.order == 2 else out

    def out_of_place(self, derived: Case) -> Case | None:
        """`derived` with every in-place op (at any depth) its out-of-place form, its request kept."""
        program, values = clone(derived.program)
        for op in program.walk():
            base = OPS[op.name].autodiff.base
            if base is not None:
                op.name = base
        try:
            verify(program)
        except Exception:
            return None
        return Case(
            program,
            [np.array(x, copy=True) for x in derived.inputs],
            derived.outputs,
            derived.wrt,
            derived.cotangents,
            [values[v] for v in derived.no_grad],
            derived.area,
            order=derived.order,
            cotangents2=derived.cotangents2,
        )

    def unflagged(self, derived: Case) -> Case | None:
        """`derived` with no value stop_gradient (at any depth), its request kept; None where it
        has none."""
        program, values = clone(derived.program)
        flagged = [v for v in values.values() if v.stop_gradient]
        if not flagged:
            return None
        for v in flagged:
            v.stop_gradient = False
        # (the generator's run and first-order program name the old program's values: dropped)
        no_grad = [values[v] for v in derived.no_grad]
        return dataclasses.replace(derived, program=program, no_grad=no_grad, evaluated=None, first_order=None)

    def binary(self, derived: Case) -> Case | None:
        """`multiply` of `derived`'s first differentiable input and a copy of it, a distinct input."""
        program = derived.program
        first = next((k for k, v in enumerate(program.inputs) if is_differentiable(v.type)), None)
        if first is None:
            return None
        v = program.inputs[first]
        new = Program()
        for name in ("a", "b"):
            x = Value(v.type, name)
            x.owner = new.block
            new.block.args.append(x)
        op = Operation("multiply", list(new.block.args), [Value(v.type)])
        new.block.append(op)
        new.outputs = list(op.results)
        value = derived.inputs[first]
        out = Case(
            new,
            [np.array(value, copy=True), np.flip(value).copy()],
            [0],
            [0, 1],
            None if derived.cotangents is None else [self._normal(op.results[0])],
            [],
            derived.area,
        )
        return self.second(out) if derived.order == 2 else out

    def without_use(self, derived: Case, use: str) -> Case | None:
        """`derived` without `use`: distinct operands for a repeated one, the out-of-place op for
        an in-place one, no stop_gradient flags, no no-grad set; None where it cannot go."""
        program = derived.program
        dop = program.block.ops[-1]
        if use == "no-grad set":
            return dataclasses.replace(derived, no_grad=[])
        new = Program()
        values: dict[Value, Value] = {}
        inputs = []
        for v, x in zip(program.inputs, derived.inputs):
            values[v] = c = Value(v.type, v.name, v.stop_gradient and use != "stop_gradient operand")
            c.owner = new.block
            new.block.args.append(c)
            inputs.append(x)
        seen: set[Value] = set()

        def read(v: Value) -> Value:
            """`v`'s copy; where the op reads an input a second time, a fresh input of its value."""
            c = values[v]
            if use == "repeated operand" and c in new.block.args:
                if c in seen:
                    fresh = Value(c.type, f"r{len(new.block.args)}", c.stop_gradient)
                    fresh.owner = new.block
                    inputs.append(np.array(inputs[new.block.args.index(c)], copy=True))
                    new.block.args.append(fresh)
                    return fresh
                seen.add(c)
            return c

        for op in program.block.ops[:-1]:  # (the combine making a vector operand)
            copy = Operation(op.name, [read(v) for v in op.operands], [_fresh(r, values) for r in op.results], op.attrs)
            new.block.append(copy)
        operands = [read(v) for v in dop.operands]
        name = dop.name
        if use == "repeated operand":
            pass
        elif use == "in place":
            base = OPS[name].autodiff.base
            if base is None:
                return None
            name = base
        elif use not in ("stop_gradient operand", "stop_gradient result"):
            return None
        results = [Value(r.type, None, r.stop_gradient and use != "stop_gradient result") for r in dop.results]
        out = Operation(name, operands, results, dict(dop.attrs))
        new.block.append(out)
        new.outputs = list(out.results)
        return self._again(derived, new, inputs)

    def without_cotangents(self, derived: Case) -> Case:
        return dataclasses.replace(derived, cotangents=None)

    def _again(self, derived: Case, program: Program, inputs: list[np.ndarray] | None = None) -> Case | None:
        """A request like `derived`'s on `program`."""
        inputs = derived.inputs if inputs is None else inputs
        try:
            verify(program)
        except Exception:
            return None
        wrt = [k for k, v in enumerate(program.inputs) if is_differentiable(v.type)]
        cots = None if derived.cotangents is None else [self._normal(v) for v in program.outputs]
        no_grad = [program.inputs[k] for k, v in enumerate(derived.program.inputs) if v in derived.no_grad]
        if len(program.outputs) == len(derived.program.outputs):  # (an output in the no-grad set stays there)
            no_grad += [w for v, w in zip(derived.program.outputs, program.outputs) if v in derived.no_grad]
        out = Case(
            program,
            [np.array(x, copy=True) for x in inputs],
            list(range(len(program.outputs))),
            wrt,
            cots,
            no_grad,
            derived.area,
        )
        return self.second(out) if derived.order == 2 else out

    def region_roles(self, op: Operation, derived: Case) -> tuple[set[str], set[str]]:
        """The names of the derived case's inputs a region carries (a loop's operands) and captures."""
        dop = derived.program.block.ops[-1]
        carried = {v.name for v in dop.operands if v.name} if op.name == "while" else set()
        captured = {v.name for v in dop.captures() if v.name}
        return carried - captured, captured


def _reads(op: Operation) -> list[Value]:
    """The tensors `op` reads: its operands, a vector operand's elements where a `combine` made it."""
    out = []
    for v in op.operands:
        if isinstance(v.type, VectorType) and v.op is not None and v.op.name == "combine":
            out += v.op.operands
        else:
            out.append(v)
    return out


def _copy(op: Operation, values: dict[Value, Value]) -> Operation:
    """A deep copy of `op` whose operands are read through `values` (which gains its results)."""

    def block(b: Block) -> Block:
        nb = Block(b.label, [_fresh(a, values) for a in b.args])
        for o in b.ops:
            nb.append(_copy(o, values))
        return nb

    blocks = [block(b) for b in op.blocks]
    new = Operation(
        op.name, [values[v] for v in op.operands], [_fresh(r, values) for r in op.results], op.attrs, blocks
    )
    return new


def _fresh(v: Value, values: dict[Value, Value]) -> Value:
    values[v] = c = Value(v.type, None, v.stop_gradient)
    return c
