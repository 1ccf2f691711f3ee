"""A case: a program, concrete inputs and a gradient request. One text file holds it all and
replays bit for bit: the program in the text format, a `---` line, then JSON for the rest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gradcert.reference.autodiff.gradients import FirstOrder
from gradcert.reference.interpreter import Evaluation
from gradcert.reference.ir import Block, Program, Value
from gradcert.reference.ir.loader import ProgramFileError, parse_source, read_source
from gradcert.reference.ir.printer import Namer, print_program
from gradcert.reference.ir.types import is_differentiable
from gradcert.reference.ops import OPS
from gradcert.reference.precision import precision, widen

FORMAT = "gradcert-case/1"


class CaseFileError(ProgramFileError):
    """A case file that is malformed; str() is one line naming the file and what is wrong."""


@dataclass
class Case:
    program: Program
    inputs: list[np.ndarray]
    outputs: list[int]  # positions in program.outputs to differentiate
    wrt: list[int]  # positions in program.inputs to differentiate with respect to
    cotangents: list[np.ndarray] | None = None  # one per differentiated output; None: ones
    no_grad: list[Value] = field(default_factory=list)
    area: str = ""
    seed: int | None = None
    # order 2: the gradient of sum <cotangents2, g> where g are the first-order gradients
    # (of sum <cotangents, outputs> w.r.t. wrt, those that are not None, in order)
    order: int = 1
    cotangents2: list[np.ndarray] | None = None
    # the program's run at the inputs, as the generator computed it (finite differences take their
    # unperturbed run from it); not part of the case's text, identity or equality
    evaluated: Evaluation | None = field(default=None, repr=False, compare=False)
    # order 2: the first-order program, as the generator made it (finite differences take it from
    # here where its request is the case's: `FirstOrder.of`); not part of the text either
    first_order: FirstOrder | None = field(default=None, repr=False, compare=False)
    # The text, made once: a case is a value (derive another with `dataclasses.replace`; setting
    # a field drops the text, changing a list in place does not).
    _text: str | None = field(default=None, init=False, repr=False, compare=False)
    _id: str | None = field(default=None, init=False, repr=False, compare=False)
    _dtype: str | None = field(default=None, init=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name[0] != "_":
            object.__setattr__(self, "_text", None)
            object.__setattr__(self, "_id", None)
            object.__setattr__(self, "_dtype", None)

    @property
    def output_values(self) -> list[Value]:
        return [self.program.outputs[i] for i in self.outputs]

    @property
    def wrt_values(self) -> list[Value]:
        return [self.program.inputs[i] for i in self.wrt]

    def to_text(self) -> str:
        if self._text is None:
            self._text = self._print()
        return self._text

    def _print(self) -> str:
        names = Namer(self.program)
        meta: dict[str, Any] = {
            "format": FORMAT,
            "area": self.area,
            "seed": self.seed,
            "outputs": self.outputs,
            "wrt": self.wrt,
            "no_grad": [names(v) for v in self.no_grad],
            "inputs": [_array(x) for x in self.inputs],
            "cotangents": None if self.cotangents is None else [_array(u) for u in self.cotangents],
            "order": self.order,
            "cotangents2": None if self.cotangents2 is None else [_array(u) for u in self.cotangents2],
        }
        # one key a line, each value on its line (the C encoder: `indent` takes the pure-Python one)
        request = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in meta.items())
        return print_program(self.program, namer=names) + "---\n{\n" + request + "\n}\n"

    @property
    def id(self) -> str:
        if self._id is None:
            self._id = hashlib.sha1(self.to_text().encode()).hexdigest()[:12]
        return self._id

    @property
    def dtype(self) -> str:
        """The program's float precision: "f32" where any of its values is float32 (`precision`;
        made once, as the text is: every oracle asks)."""
        if self._dtype is None:
            self._dtype = precision(self.program)
        return self._dtype

    def widened(self) -> Case:
        """The case on the float64 twin of its program (`precision.widen`): what its float32
        answers are judged against. A float64 case is itself."""
        if self.dtype == "f64":
            return self
        program, values = widen(self.program)

        def wide(xs: list[np.ndarray] | None) -> list[np.ndarray] | None:
            return None if xs is None else [x.astype(np.float64) if x.dtype == np.float32 else x for x in xs]

        return Case(
            program,
            wide(self.inputs) or [],
            self.outputs,
            self.wrt,
            wide(self.cotangents),
            [values[v] for v in self.no_grad],
            self.area,
            self.seed,
            self.order,
            wide(self.cotangents2),
        )

    def size(self) -> int:
        """Ops that compute: terminators and constants (`full`) are not counted."""
        return sum(1 for op in self.program.walk() if op.name not in ("yield", "full"))


def _array(x: np.ndarray) -> dict[str, Any]:
    x = np.asarray(x)
    return {"dtype": str(x.dtype), "shape": list(x.shape), "data": x.ravel().tolist()}


def _unarray(d: Any, where: str) -> np.ndarray:
    try:
        return np.asarray(d["data"], dtype=d["dtype"]).reshape(d["shape"])
    except (KeyError, TypeError, ValueError) as e:
        raise CaseFileError(f"{where}: bad array: {e}") from None


def parse_case(text: str, name: str = "<case>") -> Case:
    head, sep, tail = text.partition("\n---\n")
    if not sep:
        raise CaseFileError(f"{name}: no '---' line between the program and the request")
    try:
        program = parse_source(head + "\n", name)
    except ProgramFileError as e:
        raise CaseFileError(str(e)) from None
    try:
        meta = json.loads(tail)
    except json.JSONDecodeError as e:
        line = head.count("\n") + 2 + e.lineno
        raise CaseFileError(f"{name}:{line}:{e.colno}: bad request JSON: {e.msg}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CaseFileError(f"{name}: not a {FORMAT} file")
    names = Namer(program).names
    by_name = {"%" + n: v for v, n in names.items()}
    try:
        outputs, wrt = [int(i) for i in meta["outputs"]], [int(i) for i in meta["wrt"]]
        inputs = [_unarray(a, f"{name}: inputs[{k}]") for k, a in enumerate(meta["inputs"])]
        cots = meta.get("cotangents")
        cotangents = None if cots is None else [_unarray(a, f"{name}: cotangents[{k}]") for k, a in enumerate(cots)]
        no_grad = [by_name[n] for n in meta.get("no_grad", [])]
        order = int(meta.get("order", 1))
        c2 = meta.get("cotangents2")
        cotangents2 = None if c2 is None else [_unarray(a, f"{name}: cotangents2[{k}]") for k, a in enumerate(c2)]
    except KeyError as e:
        raise CaseFileError(f"{name}: request lacks or misnames {e}") from None
    except (TypeError, ValueError) as e:
        raise CaseFileError(f"{name}: bad request: {e}") from None
    for field_, got, n, what in (
        ("outputs", outputs, len(program.outputs), "output"),
        ("wrt", wrt, len(program.inputs), "input"),
    ):
        bad = [k for k, i in enumerate(got) if not 0 <= i < n]
        if bad:
            k = bad[0]
            raise CaseFileError(f"{name}: {field_}[{k}] is {got[k]}, but the program has {n} {what}s (0..{n - 1})")
    if len(inputs) != len(program.inputs):
        raise CaseFileError(f"{name}: {len(inputs)} input arrays for {len(program.inputs)} program inputs")
    for k, (v, x) in enumerate(zip(program.inputs, inputs)):
        if tuple(x.shape) != getattr(v.type, "shape", None):
            raise CaseFileError(f"{name}: inputs[{k}] has shape {list(x.shape)}, %{v.name} is {v.type}")
    if cotangents is not None:
        if len(cotangents) != len(outputs):
            raise CaseFileError(f"{name}: {len(cotangents)} cotangents for {len(outputs)} outputs")
    if order not in (1, 2):
        raise CaseFileError(f"{name}: order must be 1 or 2, not {order}")
    return Case(
        program,
        inputs,
        outputs,
        wrt,
        cotangents,
        no_grad,
        str(meta.get("area", "")),
        meta.get("seed"),
        order,
        cotangents2,
    )


def load_case(path: str | Path) -> Case:
    return parse_case(read_source(path, CaseFileError), str(path))


FAMILIES = frozenset({"unary", "binary", "reduction", "matmul", "shape", "vector", "misc", "index", "along"})


def describe_program(block: Block, inputs: Sequence[Value], outputs: Sequence[Value] = ()) -> set[str]:
    """The op families and program constructs in a (possibly unfinished) program."""
    out: set[str] = set()
    values = list(inputs)
    for op in block.walk():
        d = OPS[op.name]
        if d.drawing.family in FAMILIES:
            out.add(d.drawing.family)
        if op.name in ("if", "while"):
            out.add(op.name)
            if op.parent is not block:
                out.add("nested")
        if d.autodiff.inplace_of is not None:
            out.add("inplace")
        values += op.results
    if any(v.stop_gradient for v in values):
        out.add("stop_gradient")
    if any(getattr(v.type, "dtype", "") == "f32" for v in values):
        out.add("float32")
    outs = set(outputs)

    def uses(v: Value) -> int:  # (a value yielded by a block is not used twice by that)
        return sum(1 for u in v.uses if u.name != "yield") + (v in outs)

    # (the length first: most values have one use)
    if any(len(v.uses) + (v in outs) >= 2 and is_differentiable(v.type) and uses(v) >= 2 for v in values):
        out.add("fanout")
    return out


def describe(case: Case) -> set[str]:
    """The features and op families a case contains, read off the case itself."""
    p = case.program
    out = describe_program(p.block, p.inputs, p.outputs)
    if case.no_grad:
        out.add("no_grad")
    if case.cotangents is not None:
        out.add("cotangents")
    if len(case.outputs) > 1:
        out.add("multi_output")
    if any(not v.uses for v in p.inputs):
        out.add("unreachable")
    return out
