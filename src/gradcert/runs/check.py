"""Judging one's own program against a backend: `gradcert check FILE.gc --backend B` (`run`), and
`gradcert.check(program, backend=...)` in Python (`check`).

A program is judged by every oracle on seeded inputs inside each op's safe domain. By default every
float input that is not stop_gradient is differentiated, every float output is, and the cotangents
are ones; a `.case` file is judged with the request it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gradcert.conformance.areas import AREAS, Area
from gradcert.conformance.verdicts import DEFECTIVE, Verdict
from gradcert.generators.case import Case, load_case
from gradcert.reference.domains import safe_inputs
from gradcert.reference.ir import Program
from gradcert.reference.ir.loader import load_program, parse_source
from gradcert.reference.ir.types import TensorType, is_differentiable
from gradcert.runs.options import EXIT_FAIL, EXIT_OK, RunError, RunOptions, session

CHECK = Area("check", "a program of one's own")
SECOND = Area("check", "a program of one's own", order=2)


class CheckError(ValueError):
    """A request that does not fit the program (one line, naming what is wrong)."""


@dataclass
class Request:
    wrt: Sequence[int] | None = None  # input positions (default: float inputs not stop_gradient)
    outputs: Sequence[int] | None = None  # output positions (default: every float output)
    cotangents: str = "ones"  # or "random"
    no_grad: Sequence[int] = ()  # input positions
    order: int = 1
    inputs: dict[str, np.ndarray] | None = None  # by input name (default: seeded, inside safe domains)


def case_of(program: Program, request: Request, seed: int = 0, name: str = "<program>") -> Case:
    """The case that judges `program` as `request` asks, on inputs drawn with `seed`."""
    ins, outs = program.inputs, program.outputs
    wrt = (
        list(request.wrt)
        if request.wrt is not None
        else [i for i, v in enumerate(ins) if _float(v.type) and not v.stop_gradient]
    )
    outputs = (
        list(request.outputs)
        if request.outputs is not None
        else [i for i, v in enumerate(outs) if is_differentiable(v.type)]
    )
    for what, got, n in (
        ("input", wrt, len(ins)),
        ("output", outputs, len(outs)),
        ("input", request.no_grad, len(ins)),
    ):
        bad = [i for i in got if not 0 <= i < n]
        if bad:
            raise CheckError(f"{name}: {what} {bad[0]} is out of range (the program has {n} {what}s: 0..{n - 1})")
    for what, got, values in (("input", wrt, ins), ("output", outputs, outs)):
        bad = [i for i in got if not is_differentiable(values[i].type)]
        if bad:  # (no gradient is defined there: an index, a counter, a mask)
            v = values[bad[0]]
            why = "is not a float tensor: no gradient is defined for it"
            raise CheckError(f"{name}: {what} {bad[0]} (%{v.name}: {v.type}) {why}")
    if not wrt or not outputs:
        raise CheckError(f"{name}: nothing to differentiate ({'no float input' if not wrt else 'no float output'})")
    xs = safe_inputs(program, seed)
    if request.inputs is not None:
        missing = [str(v.name) for v in ins if str(v.name) not in request.inputs]
        if missing:
            raise CheckError(f"{name}: no value given for input %{missing[0]}")
        xs = [np.asarray(request.inputs[str(v.name)], dtype=x.dtype).reshape(x.shape) for v, x in zip(ins, xs)]
    cotangents = None
    if request.cotangents == "random":
        rng = np.random.default_rng(seed + 1)
        cotangents = [rng.normal(size=_shape(outs[i].type)) for i in outputs]
    elif request.cotangents != "ones":
        raise CheckError(f"--cotangents {request.cotangents!r}: ones or random")
    if request.order not in (1, 2):
        raise CheckError(f"--order {request.order}: 1 or 2")
    return Case(
        program,
        xs,
        outputs,
        wrt,
        cotangents,
        [ins[i] for i in request.no_grad],
        area=CHECK.name,
        seed=seed,
        order=request.order,
    )


def _float(t: Any) -> bool:
    return isinstance(t, TensorType) and t.dtype.startswith("f")


def _shape(t: Any) -> tuple[int, ...]:
    assert isinstance(t, TensorType)
    return t.shape


def cases_of(path: str | Path, request: Request, seeds: Sequence[int]) -> list[Case]:
    """The cases that judge the file at `path`: a `.case` file as it is, a program once per seed."""
    if str(path).endswith(".case"):
        return [load_case(path)]
    program = load_program(path)
    return [case_of(program, request, s, str(path)) for s in seeds]


def area_of(case: Case) -> Area:
    return SECOND if case.order == 2 else CHECK


def check(
    program: Program | str,
    backend: str = "reference",
    wrt: Sequence[int] | None = None,
    outputs: Sequence[int] | None = None,
    cotangents: str = "ones",
    no_grad: Sequence[int] = (),
    order: int = 1,
    seed: int = 0,
    inputs: dict[str, np.ndarray] | None = None,
    isolate: bool | None = False,
    device: str = "cpu",
) -> Verdict:
    """The verdict of every oracle on `program` (a Program or its text) differentiated by
    `backend`, on inputs drawn with `seed` (or `inputs`, by name); `device` "gpu" runs the backend
    and the oracles on a GPU."""
    from gradcert.conformance.session import Session

    p = parse_source(program) if isinstance(program, str) else program
    case = case_of(p, Request(wrt, outputs, cotangents, no_grad, order, inputs), seed)
    s = Session(backend, None, "reports/findings", isolate=isolate, device=device)
    try:
        return s.judge(area_of(case), case)
    finally:
        s.close()


def with_area(case: Case) -> Case:
    return case if case.area else replace(case, area=CHECK.name)


def run(opts: RunOptions) -> int:
    """`gradcert check`: judge programs of one's own (or saved cases) against a backend, each on
    `opts.repeat` seeds: exit 1 if one fails."""
    if opts.repeat < 1:
        raise RunError(f"--repeat {opts.repeat}: at least 1")
    inputs = None
    if opts.inputs:
        if not Path(opts.inputs).is_file():
            raise RunError(f"{opts.inputs}: no such .npz file")
        with np.load(opts.inputs) as z:
            inputs = {k: z[k] for k in z.files}
    request = Request(
        _ints(opts.wrt), _ints(opts.outputs), opts.cotangents, _ints(opts.no_grad) or (), opts.order, inputs
    )
    seeds = range(opts.seed, opts.seed + opts.repeat)
    todo = [(path, case) for path in opts.files for case in cases_of(path, request, seeds)]  # (bad input: now)
    s = session(opts)
    failed = 0
    try:
        for path, case in todo:
            area = AREAS[case.area] if case.area in AREAS else area_of(case)
            v = s.judge(area, case)
            seed = "" if case.seed is None or opts.repeat == 1 else f" (seed {case.seed})"
            print(f"{path}{seed}: {v.status}" + (f" ({v.oracle}): {v.message}" if v.kind else ""))
            if v.status in DEFECTIVE:
                failed += 1
                saved = s.save(case, v)
                print(f"  signature: {v.signature}")
                print(f"  case: {saved}\n  replay: {s.replay_command(saved)}")
    finally:
        s.close()
    print(f"{len(todo) - failed} of {len(todo)} passed" + (f", {failed} failed" if failed else ""))
    return EXIT_FAIL if failed else EXIT_OK


def _ints(text: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise RunError(f"{text!r} is not a comma-separated list of positions (0, 1, ...)") from None
