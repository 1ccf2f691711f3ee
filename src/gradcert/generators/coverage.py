"""The interaction-coverage model: which pairs of situations a backward meets in a case.

Every value-making op of a case (and every program input) is one *event*, described by cells, one
per dimension that changes the path a backward takes through it:

- `op`: its kind — an op family (`unary`, `binary`, `reduction`, `matmul`, `shape`, `vector`,
  `misc`, `index`, `along`), a region (`if`, `while`) or `input`;
- `ctx`: where it sits — `top`, directly in an `if` branch, directly in a `while` body, nested two
  deep, three or more;
- `rank`: the rank (0-4) of the float tensor it reads (its result's, for an input); `dtype`
  likewise (an index tensor is read, never differentiated: it makes no event);
- `trips`: for a loop and for everything in its body, the loop's trip count: 0, 1, 2-3, 4-8, or
  `data` where the count is decided by a float condition;
- flags: `inplace` (an in-place op), `broadcast` (operands of different shapes), `stop_gradient`,
  `no_grad` (a result in the request's no-grad set), `fanout` (a result used twice or more),
  `element` (an operand that is a split's element).

A *pair* is two cells of one event: `op:shape` with `rank:4` is a shape op on a rank-4 tensor,
`stop_gradient` with `ctx:while` a value marked stop_gradient inside a loop body. Single-feature
counts say nothing about those; coverage is the share of the reachable pairs that cases hit.
`UNREACHABLE` says which pairs no valid program of the op set holds, and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import combinations

from gradcert.generators.case import Case
from gradcert.reference.ir import Block, Operation, Value
from gradcert.reference.ir.types import TensorType, is_differentiable
from gradcert.reference.ops import OPS

Pair = tuple[str, str]

KINDS = ("unary", "binary", "reduction", "matmul", "shape", "vector", "misc", "index", "along", "if", "while", "input")
CONTEXTS = ("top", "if", "while", "depth2", "depth3")
RANKS = ("0", "1", "2", "3", "4")
TRIPS = ("0", "1", "2-3", "4-8", "data")
DTYPES = ("f64", "f32")  # what the generators draw
FLAGS = ("inplace", "broadcast", "stop_gradient", "no_grad", "fanout", "element")

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "op": tuple(f"op:{k}" for k in KINDS),
    "ctx": tuple(f"ctx:{c}" for c in CONTEXTS),
    "rank": tuple(f"rank:{r}" for r in RANKS),
    "dtype": tuple(f"dtype:{d}" for d in DTYPES),
    "trips": tuple(f"trips:{t}" for t in TRIPS),
    **{f: (f,) for f in FLAGS},
}
CELLS = tuple(c for cells in DIMENSIONS.values() for c in cells)
_DIM = {c: d for d, cells in DIMENSIONS.items() for c in cells}
_REGIONS = ("if", "while")
_BROADCASTING = ("binary", "misc")  # (an index op's operands differ in shape by design)

# Why a pair is never met, by construction of the op set and the IR: each rule is a predicate on a
# pair's two cells (`_with(a, b, cell)`: the pair's other cell where one is `cell`), with its reason.
UNREACHABLE: list[tuple[str, Callable[[str, str], bool]]] = [
    (
        "matmul multiplies matrices: its operand has rank 2",
        lambda a, b: _dim(_with(a, b, "op:matmul")) == "rank" and _with(a, b, "op:matmul") != "rank:2",
    ),
    (
        "a region op reads no tensor of its own (its ops do): no rank, dtype, broadcast or element",
        lambda a, b: any(_dim(_with(a, b, f"op:{r}")) in ("rank", "dtype", "broadcast", "element") for r in _REGIONS),
    ),
    (
        "a program input is made by no op, at the top level: no loop, in-place write or operands",
        lambda a, b: (
            _dim(_with(a, b, "op:input")) in ("ctx", "trips", "inplace", "broadcast", "element")
            and _with(a, b, "op:input") != "ctx:top"
        ),
    ),
    (
        "only elementwise ops and slice assignment have in-place variants",
        lambda a, b: (
            _dim(_with(a, b, "inplace")) == "op" and _with(a, b, "inplace")[3:] not in ("unary", "binary", "index")
        ),
    ),
    (
        "indexing and ops along an axis read a tensor of rank >= 1",
        lambda a, b: {a, b} in ({"op:index", "rank:0"}, {"op:along", "rank:0"}),
    ),
    (
        "only binary ops and where broadcast their operands",
        lambda a, b: _dim(_with(a, b, "broadcast")) == "op" and _with(a, b, "broadcast")[3:] not in _BROADCASTING,
    ),
    (
        "an in-place op writes a tensor of its own block, never a split's element",
        lambda a, b: {a, b} == {"inplace", "element"},
    ),
]


def _with(a: str, b: str, cell: str) -> str:
    return b if a == cell else a if b == cell else ""


def _dim(c: str) -> str:
    return _DIM.get(c, "")


def _unreachable(a: str, b: str) -> str | None:
    for reason, rule in UNREACHABLE:
        if rule(a, b):
            return reason
    return None


def _pairs_of(cells: Iterable[str]) -> Iterator[Pair]:
    return combinations(sorted(cells), 2)


def reachable_pairs() -> list[Pair]:
    """Every pair of cells of different dimensions that some valid program holds."""
    return [(a, b) for a, b in combinations(sorted(CELLS), 2) if _dim(a) != _dim(b) and _unreachable(a, b) is None]


def unreachable_pairs() -> dict[Pair, str]:
    """The pairs of cells of different dimensions that no valid program holds, with the reason."""
    out = {}
    for a, b in combinations(sorted(CELLS), 2):
        if _dim(a) != _dim(b):
            why = _unreachable(a, b)
            if why is not None:
                out[a, b] = why
    return out


REACHABLE = frozenset(reachable_pairs())


def events(case: Case) -> Iterator[frozenset[str]]:
    """The cells of every event of `case` (see the module docstring)."""
    p = case.program
    no_grad = set(case.no_grad)
    outputs = set(p.outputs)

    def flags(results: Iterable[Value]) -> set[str]:
        out = set()
        for r in results:
            if r.stop_gradient:
                out.add("stop_gradient")
            if r in no_grad:
                out.add("no_grad")
            if is_differentiable(r.type) and sum(1 for u in r.uses if u.name != "yield") + (r in outputs) >= 2:
                out.add("fanout")
        return out

    for v in p.inputs:
        if isinstance(v.type, TensorType) and is_differentiable(v.type):
            yield frozenset({"op:input", "ctx:top", *_tensor(v), *flags([v])})
    yield from _block(p.block, 0, "top", None, flags)


def _tensor(v: Value) -> set[str]:
    t = v.type
    return {f"rank:{min(t.rank, 4)}", f"dtype:{t.dtype}"} if isinstance(t, TensorType) else set()


def _block(block: Block, depth: int, region: str, trips: str | None, flags: object) -> Iterator[frozenset[str]]:
    ctx = "ctx:" + ("top" if depth == 0 else region if depth == 1 else "depth2" if depth == 2 else "depth3")
    for op in block.ops:
        d = OPS[op.name]
        if op.name in _REGIONS:
            own = _trip_bucket(op) if op.name == "while" else trips
            cells = {f"op:{op.name}", ctx, *flags(op.results)}  # type: ignore[operator]
            if own is not None:
                cells.add(f"trips:{own}")
            yield frozenset(cells)
            for b in op.blocks[-1:] if op.name == "while" else op.blocks:  # (a loop's condition only compares)
                yield from _block(b, depth + 1, op.name, own, flags)
            continue
        if d.drawing.family not in KINDS or not any(is_differentiable(r.type) for r in op.results):
            continue  # (a loop counter's arithmetic, a split's tuple: no value a backward differentiates)
        tensors = [v for v in op.operands if isinstance(v.type, TensorType) and is_differentiable(v.type)]
        cells = {f"op:{d.drawing.family}", ctx, *flags(op.results)}  # type: ignore[operator]
        if tensors:
            cells |= _tensor(tensors[0])
        elif op.results:
            first = op.results[0].type
            cells |= _tensor(op.results[0]) if isinstance(first, TensorType) else set()
        if trips is not None:
            cells.add(f"trips:{trips}")
        if d.autodiff.inplace_of is not None:
            cells.add("inplace")
        if d.drawing.family in _BROADCASTING and len({v.type.shape for v in tensors}) > 1:  # type: ignore[union-attr]
            cells.add("broadcast")
        if any(isinstance(v.owner, Operation) and v.owner.name == "split" for v in op.operands):
            cells.add("element")
        yield frozenset(cells)


def _trip_bucket(op: Operation) -> str:
    """The bucket of a loop's trip count: counted (`i < n` from constants) or decided by data."""
    cond = op.blocks[0]
    test = cond.terminator.operands[0].owner if cond.terminator is not None else None
    if not isinstance(test, Operation) or test.name != "less_than":
        return "data"
    i, n = test.operands
    if not (isinstance(i.owner, Block) and i is cond.args[0] and _const(n) is not None):
        return "data"
    start = _const(op.operands[0])
    if start is None:
        return "data"
    k = max(0, int((_const(n) or 0) - start))
    return "0" if k == 0 else "1" if k == 1 else "2-3" if k <= 3 else "4-8"


def _const(v: Value) -> float | None:
    op = v.owner
    return float(op.attrs["value"]) if isinstance(op, Operation) and op.name == "full" else None


def pairs(case: Case) -> set[Pair]:
    """The reachable pairs `case` hits."""
    out: set[Pair] = set()
    for cells in events(case):
        out.update(_pairs_of(cells))
    return out & REACHABLE


@dataclass
class Tally:
    """How many cases hit each pair: a run's coverage, kept as it goes."""

    cases: int = 0
    pairs: Counter[Pair] = field(default_factory=Counter)

    def add(self, case: Case) -> set[Pair]:
        hit = pairs(case)
        self.cases += 1
        self.pairs.update(hit)
        return hit

    def share(self) -> float:
        return len(self.pairs.keys() & REACHABLE) / len(REACHABLE)

    def missing(self) -> list[Pair]:
        return sorted(REACHABLE - self.pairs.keys())

    def novelty(self, hit: Iterable[Pair]) -> float:
        """How much a case of pairs `hit` adds: the rarer its pairs so far, the more."""
        return sum(1.0 / (1 + self.pairs[p]) ** 2 for p in hit)

    def merge(self, other: Tally) -> None:
        self.cases += other.cases
        self.pairs.update(other.pairs)

    def to_json(self) -> dict[str, object]:
        return {"cases": self.cases, "pairs": {f"{a}|{b}": n for (a, b), n in sorted(self.pairs.items())}}

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Tally:
        """A tally as `to_json` wrote it (pairs this version no longer reaches are left out)."""
        t = cls(int(d.get("cases", 0)))  # type: ignore[call-overload]
        for k, n in dict(d.get("pairs", {})).items():  # type: ignore[call-overload]
            a, _, b = str(k).partition("|")
            if (a, b) in REACHABLE:
                t.pairs[a, b] += int(n)
        return t

    def summary(self) -> str:
        """One line: the share of reachable pairs hit, and the pairs missed (the first few)."""
        missing = self.missing()
        line = f"coverage: {len(REACHABLE) - len(missing)}/{len(REACHABLE)} reachable pairs ({100 * self.share():.1f}%)"
        if missing:
            shown = ", ".join(f"{a} & {b}" for a, b in missing[:6])
            line += f"; unreached: {shown}{' …' if len(missing) > 6 else ''}"
        return line
