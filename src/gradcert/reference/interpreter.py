"""Runs a verified program on an array namespace: NumPy by default, CuPy, or `array_api_strict`.

In-place ops really overwrite their operand's buffer. Values cross block boundaries (block
arguments, yields) by copy, so an in-place op inside a block never clobbers a value outside it.
A run records a trace: the branch taken at each `if` execution, the trip count of each `while`
execution and the side of each kink evaluation; two runs took the same smooth piece of the program
exactly when their traces are equal.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcert.reference.ir import Block, Operation, Program, Value
from gradcert.reference.ir.types import StackType, TensorType, VectorType, xp_dtype
from gradcert.reference.ops import OPS


class InterpreterError(Exception):
    def __init__(self, message: str, op: Operation | None = None) -> None:
        where = f"line {op.line}: " if op is not None and op.line else ""
        name = f"'{op.name}': " if op is not None else ""
        super().__init__(f"{where}{name}{message}")
        self.op = op


def to_numpy(x: Any) -> np.ndarray:
    """A host NumPy copy of an array from any supported namespace."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):  # a NumPy scalar (a 0-d kernel's result): DLPack costs more
        return np.asarray(x)
    if hasattr(x, "get"):  # CuPy
        return np.asarray(x.get())
    try:
        return np.from_dlpack(x)
    except (TypeError, RuntimeError, BufferError, AttributeError):
        return np.asarray(x)


@dataclass
class Run:
    outputs: list[Any]
    trace: list[tuple[Operation, Any]] = field(default_factory=list)


@dataclass
class Evaluation:
    """A run of `program` at `inputs` that its maker kept (a generator computes every value as it
    draws the program): its trace, and each top-level value as first computed (before an in-place
    op overwrote it). What a finite-difference oracle would otherwise compute again."""

    program: Program
    inputs: list[Any]  # the very arrays it ran on
    trace: list[tuple[Operation, Any]]
    values: dict[Value, Any]

    def of(self, program: Program, inputs: Sequence[Any]) -> bool:
        """Whether this is a run of `program` at `inputs` (the same objects)."""
        return (
            self.program is program and len(inputs) == len(self.inputs) and all(map(operator.is_, inputs, self.inputs))
        )


def namespace(device: str = "cpu") -> Any:
    """The array namespace for a device name: "cpu" (NumPy) or "gpu" (CuPy, with a CUDA device)."""
    if device == "cpu":
        return np
    if device == "gpu":
        try:
            import cupy
        except ImportError as e:
            raise InterpreterError("device 'gpu' needs CuPy: pip install 'gradcert[gpu]'") from e
        try:
            found = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # no driver, or a broken one: CUDARuntimeError
            raise InterpreterError(f"device 'gpu': CuPy finds no CUDA device ({e})") from e
        if not found:
            raise InterpreterError("device 'gpu': CuPy finds no CUDA device")
        return cupy
    raise InterpreterError(f"unknown device {device!r} (expected cpu or gpu)")


class Interpreter:
    def __init__(
        self,
        xp: Any = np,
        trip_limit: int = 10_000,
        record: bool = True,
        keep: frozenset[Value] = frozenset(),
        frozen: Mapping[Value, Sequence[Any]] | None = None,
    ) -> None:
        """`keep`: values whose every computed array is kept in `self.kept` (in order);
        `frozen`: values replaced, computation by computation, by given arrays -- how a
        finite-difference run holds stop-gradient values constant."""
        self.xp = xp
        self.trip_limit = trip_limit
        self.recording = record
        self.trace: list[tuple[Operation, Any]] = []
        self.env: dict[Value, Any] = {}
        self.keep = keep
        self.kept: dict[Value, list[Any]] = {}
        self.frozen = {v: list(xs) for v, xs in (frozen or {}).items()}
        self._watch = bool(keep or self.frozen)

    # --- used by op definitions' `run` ---------------------------------------------------------
    def record(self, op: Operation, data: Any) -> None:
        if self.recording:
            self.trace.append((op, data))

    def truth(self, x: Any) -> bool:
        return bool(x)

    def error(self, op: Operation, message: str) -> InterpreterError:
        return InterpreterError(message, op)

    def copy(self, x: Any) -> Any:
        if isinstance(x, tuple):
            return tuple(self.xp.asarray(e, copy=True) for e in x)
        if isinstance(x, list):  # a stack: a handle, shared on purpose
            return x
        return self.xp.asarray(x, copy=True)

    def run_block(self, block: Block, args: Sequence[Any]) -> list[Any]:
        """Bind copies of `args` to the block's arguments, run it, return copies of its yields."""
        env = self.env
        for a, x in zip(block.args, args):
            env[a] = self.copy(x)
        if self._watch and block.args:
            self.watch(block.args)
        ops = block.ops
        term = block.terminator
        for op in ops[:-1] if term is not None else ops:
            self.step(op)
        return [self.copy(env[v]) for v in term.operands] if term is not None else []

    # --- the loop ------------------------------------------------------------------------------
    def step(self, op: Operation) -> None:
        d = OPS[op.name]
        env = self.env
        args = [env[v] for v in op.operands]
        try:
            if d.execution.run is not None:
                out = d.execution.run(self, op, args)
            else:
                assert d.kernel is not None, op.name
                if self.recording and d.drawing.kink is not None:
                    side = to_numpy(self.xp.sign(d.drawing.kink(self.xp, *args, **op.attrs)))
                    self.trace.append((op, side.tobytes()))
                out = d.kernel(self.xp, *args, **op.attrs)
                if not d.execution.multi and not isinstance(out, (tuple, list)):
                    out = self.xp.asarray(out)  # NumPy reductions return scalars, not 0-d arrays
        except InterpreterError:
            raise
        except Exception as e:  # a kernel failing on valid input is our bug: say where
            raise InterpreterError(f"{type(e).__name__}: {e}", op) from e
        if d.autodiff.inplace_of is not None:
            target = args[d.autodiff.inplace_of]
            target[...] = out
            out = target
        elif d.execution.view:
            out = self.copy(out) if not d.execution.multi else tuple(self.copy(o) for o in out)
        if d.execution.multi:
            for r, x in zip(op.results, out):
                env[r] = x
        else:
            env[op.results[0]] = out
        if self._watch:
            self.watch(op.results)

    def watch(self, values: Sequence[Value]) -> None:
        for r in values:
            if r in self.frozen:
                k = len(self.kept.setdefault(r, []))
                self.env[r] = self.copy(self.frozen[r][min(k, len(self.frozen[r]) - 1)])
            if r in self.keep or r in self.frozen:
                self.kept.setdefault(r, []).append(self.copy(self.env[r]))

    def run(
        self, program: Program, inputs: Sequence[Any] | Mapping[str, Any], fetch: Sequence[Value] | None = None
    ) -> Run:
        """Run `program`; returns the fetched top-level values (default: the outputs) and the trace."""
        if isinstance(inputs, Mapping):
            missing = [v.name for v in program.inputs if v.name not in inputs]
            if missing:
                raise InterpreterError(f"no value given for input(s) {', '.join('%' + str(m) for m in missing)}")
            inputs = [inputs[str(v.name)] for v in program.inputs]
        if len(inputs) != len(program.inputs):
            raise InterpreterError(f"program takes {len(program.inputs)} input(s), got {len(inputs)}")
        self.trace, self.env, self.kept = [], {}, {}
        for v, x in zip(program.inputs, inputs):
            self.env[v] = self.coerce(v, x)
        if self._watch:
            self.watch(program.inputs)
        self.run_block(program.block, [])
        wanted = program.outputs if fetch is None else fetch
        try:
            outs = [self.env[v] for v in wanted]
        except KeyError:
            raise InterpreterError("can only fetch values of the top-level block") from None
        return Run(outs, self.trace)

    def coerce(self, v: Value, x: Any) -> Any:
        t = v.type
        if isinstance(t, (VectorType, StackType)):
            raise InterpreterError(f"input %{v.name} must be a tensor, its type is {t}")
        assert isinstance(t, TensorType)
        arr = self.xp.asarray(x, dtype=xp_dtype(self.xp, t.dtype), copy=True)
        if tuple(arr.shape) != t.shape:
            raise InterpreterError(f"input %{v.name} has shape {list(arr.shape)}, expected {list(t.shape)}")
        return arr


def run(program: Program, inputs: Sequence[Any] | Mapping[str, Any], xp: Any = np, **kw: Any) -> Run:
    return Interpreter(xp, **kw).run(program, inputs)
