"""Distinct defects: what is wrong in a backend, not which program showed it.

A failing case's **signature** is `culprit | kind`:

- the **kind** of discrepancy, read off the verdict alone: None where a gradient belongs, a
  gradient where none belongs, a wrong value (zeros included), a non-finite value, a wrong shape or
  dtype, which invariant is broken, which exception type the backend raised (its message with
  numbers, names and shapes blanked), crash (how the process died is in the message), timeout,
  refused, nondeterministic;
- the **culprit**: the smallest part of the case's program whose gradient is wrong, found by
  running derived cases through the same backend (`localize.py`): an op and how it is used (`op
  tanh`, `op add (repeated operand)`), a use that fails with any op (`a value read twice by one
  op`, `the no-grad set`), or a construct (`while: a loop-carried value`, `accumulation of a value
  read by several ops (add_n of three or more)`), with `[second order]` or `[float32]` where only
  that order or dtype fails. A failure no derived case shows keeps where it was met:
  `unlocalized in <area> (<oracle>)`, its kind naming the role of the wrong inputs (`role`).

No area is in a localized signature: one bug met in twelve areas is one defect, listed with the
areas where it showed. Cases with one signature are one defect; its minimal case is the derived
case that showed the culprit (an unlocalized defect's first case is shrunk), and the canonical form
of that case (`canonical`) is shown beside it.

A backend's known defects are a TOML file, `<backend>.toml` in the known-defects folder
(`known/`): one `[[defect]]` table each, with its signature (`culprit`, `kind`), the minimal case
that shows it (`case`, relative to the folder) and the `reason`: what is wrong, in the framework's
terms. A failing case is `known` only where its own signature is a known defect's.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradcert.conformance.verdicts import Status

# statuses whose kind is the status itself
_PLAIN = (Status.TIMEOUT, Status.REFUSED, Status.NONDETERMINISTIC)


def kind(
    status: str, oracle: str, message: str, actual: dict[str, Any] | None = None, wrong: Any = (), case: Any = None
) -> str:
    """The kind of discrepancy of a failing verdict (its status, oracle, message, the gradients
    the backend gave and the inputs found wrong), and for a wrong value, the role of the wrong
    inputs in `case`'s program (`role`)."""
    if status in _PLAIN:
        return status
    if status == Status.CRASH:
        return "crash"  # (how it died is in the message: one native fault aborts in one run, segfaults in the next)
    if oracle == "lowering":
        return "adapter lowering bug"
    if status == Status.ERROR:
        kind_, _, rest = message.partition(":")
        return f"raised {kind_.strip()}: {_blank(rest)}" if re.fullmatch(r"[\w.]+", kind_.strip()) else "raised"
    if oracle == "semantics":
        if "got None" in message:
            return "None where a gradient belongs"
        if "got a gradient" in message:
            return "a gradient where none belongs"
        if "gradient is" in message:
            return "wrong shape or dtype"
        return "wrong number of gradients"
    if oracle == "invariants":
        # (which op is left over varies with the program; the defect is leaving one)
        found = sorted({m[1] for m in re.finditer(r"(zero-fill|dead backward op)", message)})
        return " and ".join(found) + " left without a use" if found else _blank(message)
    if oracle == "first_order" and "where the reference has" in message:
        return "first-order gradients where the reference has None, or None where it has one"
    if oracle == "bad_request":
        return "accepted a wrong-shape cotangent" if "was accepted" in message else "unclear error for a bad request"
    grads = [actual.get(n) for n in wrong] if actual else []
    flat = [x for g in grads if g is not None for x in _flatten(g)]
    what = "non-finite gradient" if flat and any(_nonfinite(x) for x in flat) else "wrong value"
    # (zeros too: one wrong rule gives zeros in one case and other values in the next)
    return what if case is None else f"{what} {role(case, list(wrong))}"


def _nonfinite(x: Any) -> bool:
    return isinstance(x, float) and (x != x or x in (float("inf"), float("-inf")))


ROLES = ("of an input captured by a loop", "of an input carried by a loop", "of an input reaching a branch")


def role(case: Any, names: list[str]) -> str:
    """Where the wrong inputs' values flow, the most telling place first: captured by a `while`
    body (defined outside it, read inside), carried by a `while`, read inside an `if` branch, or
    only at the top level. A backward's bug lives in one of these mechanisms (accumulation across
    trips, the carried values' stack, a branch's backward): the role tells two bugs of one area
    apart, and stays the same from one program showing a bug to the next. Only what the case's
    run executes counts: a loop that runs no trip passes its values through untouched, and a
    branch not taken reads nothing."""
    from gradcert.reference.ir import captures

    program = case.program
    start = [v for v in program.inputs if v.name in names] or [program.inputs[i] for i in case.wrt]
    derived = set(start)
    ran = _executed(case)
    best = len(ROLES)

    def visit(ops: Any) -> None:
        nonlocal best
        for op in ops:
            blocks = [b for b in op.blocks if b in ran] if ran is not None else op.blocks
            caps = [v for v in captures(blocks) if v in derived]
            if op.name == "while" and blocks:
                carried = [k for k, v in enumerate(op.operands) if v in derived]
                best = min(best, 0 if caps else 1 if carried else best)
                for b in blocks:  # (the blocks' arguments are the carried values)
                    derived.update(b.args[k] for k in carried if k < len(b.args))
            elif op.name == "if" and caps:
                best = min(best, 2)
            for b in blocks:
                visit(b.ops)
            if caps or any(v in derived for v in op.operands):
                derived.update(op.results)

    visit(program.block.ops)
    return ROLES[best] if best < len(ROLES) else TOP


def _executed(case: Any) -> set[Any] | None:
    """The blocks the case's forward run executes (a loop's where it runs a trip, a branch where it
    is taken): the generator's run where it kept one (`Case.evaluated`), else a run of the
    interpreter; None where that fails (then every block counts)."""
    from gradcert.reference.interpreter import Interpreter

    if case.evaluated is not None and case.evaluated.program is case.program:
        trace = case.evaluated.trace
    else:
        try:
            trace = Interpreter().run(case.program, [x.copy() for x in case.inputs]).trace
        except Exception:
            return None
    ran: set[Any] = set()
    for op, data in trace:
        if op.name == "while" and data:
            ran.update(op.blocks)
        elif op.name == "if":
            ran.add(op.blocks[0 if data else 1])
    return ran


TOP = "at the top level only"


def unroled(sig: str) -> str:
    """`sig` without the role of its wrong inputs: what two signatures that differ only in where
    the wrong values flow share."""
    for r in (*ROLES, TOP):
        if sig.endswith(" " + r):
            return sig[: -len(r) - 1]
    return sig


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, list):
        return [y for e in x for y in _flatten(e)]
    return [x]


def _blank(text: str) -> str:
    """A message with what varies from case to case blanked: shapes, numbers, quoted names, %values."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"\[[^\]]*\]|\([^)]*\)", "[…]", first)
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", first)
    first = re.sub(r"%\w+|0x[0-9a-f]+|\d+(\.\d+)?(e-?\d+)?", "#", first)
    return " ".join(first.split())[:120]


def signature(culprit: str, kind_: str) -> str:
    return f"{culprit} | {kind_}"


def unlocalized(area: str, oracle: str) -> str:
    """The culprit of a failure no derived case shows: where it was met."""
    return f"unlocalized in {area} ({oracle or 'backend'})"


def split(sig: str) -> tuple[str, str]:
    """A signature's culprit and kind."""
    culprit, _, kind_ = sig.partition(" | ")
    return culprit, kind_


def canonical(case: Any) -> str:
    """A case's program as its op skeleton with nesting (`while{cond: less_than; body: sin}`), without
    constants, names or values: how one defect's minimal cases are compared and shown."""

    def block(ops: Any) -> str:
        parts = []
        for op in ops:
            if op.name in ("full", "yield"):
                continue
            if op.blocks:
                inner = "; ".join(f"{b.label}: {block(b.ops)}" if b.label else block(b.ops) for b in op.blocks)
                parts.append(f"{op.name}{{{inner}}}")
            else:
                parts.append(op.name)
        return " ".join(parts) or "-"

    return block(case.program.block.ops)


@dataclass(frozen=True)
class KnownDefect:
    culprit: str
    kind: str
    case: str  # the minimal case file, relative to the known-defects folder
    reason: str
    area: str = ""  # the area its minimal case is judged in (read off the case file)

    @property
    def signature(self) -> str:
        return signature(self.culprit, self.kind)


class KnownDefectsError(ValueError):
    pass


KNOWN = Path(__file__).resolve().parents[1] / "known"


def known_folder() -> Path:
    return Path(os.environ.get("GRADCERT_KNOWN_DEFECTS", KNOWN))


_FIELDS = ("culprit", "kind", "case", "reason")


def known_defects(backend: str) -> dict[str, KnownDefect]:
    """The backend's known defects by signature (`known/<backend>.toml`); a file that does not
    parse, lacks a field, names a case file that is not there or files one signature twice is an
    error naming it."""
    path = known_folder() / f"{backend}.toml"
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise KnownDefectsError(f"{path}: {e}") from None
    out: dict[str, KnownDefect] = {}
    for n, d in enumerate(data.get("defect", []), 1):
        missing = [k for k in _FIELDS if k not in d]
        if missing:
            raise KnownDefectsError(f"{path}: defect {n} lacks {', '.join(missing)}")
        k = KnownDefect(*(str(d[f]) for f in _FIELDS))
        if not (known_folder() / k.case).exists():
            raise KnownDefectsError(f"{path}: defect {n}: no case file {k.case}")
        object.__setattr__(k, "area", _area(known_folder() / k.case))
        if k.signature in out:
            raise KnownDefectsError(f"{path}: defect {n} files {k.signature!r} again")
        out[k.signature] = k
    return out


def _area(path: Path) -> str:
    """The area a case file names (its request's `area`), without parsing its program."""
    import json

    try:
        return str(json.loads(path.read_text().partition("\n---\n")[2]).get("area", ""))
    except (ValueError, AttributeError):
        return ""


def entries(records: Any, folder: Path, backend: str) -> str:
    """Known-defect tables (TOML) for every defect of `backend` in `records` that is not known
    yet: one per signature, its smallest case (a defect's minimal case where one is on record)
    written to `folder/<backend>/<id>.case` (`gradcert known`, which is how a team accepts
    today's defects as its baseline). The reason is the failure's message until someone writes
    what is wrong."""
    smallest: dict[str, dict[str, Any]] = {}
    for r in records:
        sig = r.get("signature") or r.get("defect")
        if r.get("backend") != backend or not sig or r.get("status") == Status.KNOWN or "case" not in r:
            continue
        if sig not in smallest or _rank(r) < _rank(smallest[sig]):
            smallest[sig] = r
    out = []
    for sig, r in sorted(smallest.items()):
        culprit, kind_ = split(sig)
        from gradcert.generators.case import parse_case

        case = parse_case(r["case"])
        rel = f"{backend}/{case.id}.case"
        (folder / backend).mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(r["case"])
        reason = " ".join(str(r.get("message", "")).split())[:200]
        out.append(
            "[[defect]]\n"
            f"culprit = {_quote(culprit)}\nkind = {_quote(kind_)}\n"
            f"case = {_quote(rel)}\nreason = {_quote(reason)}\n"
        )
    return "\n".join(out)


def _rank(r: dict[str, Any]) -> tuple[bool, int]:
    """Which record of a signature makes its known entry: a defect's minimal case first, then the smallest."""
    return "defect" not in r, int(r.get("size", 0))


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
