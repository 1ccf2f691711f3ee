"""What a backend is, what it returns, and what the oracles say of it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # (annotations only: certify's own process and the report import no NumPy)
    import numpy as np

    from gradcert.generators.case import Case


class Status(StrEnum):
    """A case's verdict. A member is its own name as a string: records keep it as text."""

    PASS = "pass"
    KNOWN = "known"  # a failure that is one of the backend's known defects (`defects.py`), not failing
    FAIL = "fail"
    INVALID = "invalid"  # the case cannot be judged (a branch flips under perturbation)
    UNSUPPORTED = "unsupported"  # the backend does not declare the capability
    REFUSED = "refused"  # it declares it, yet raised `Unsupported`
    ERROR = "error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    NONDETERMINISTIC = "nondeterministic"  # a failure whose answers differ when the case is judged again


STATUSES = tuple(Status)
# the verdicts that fail a test
FAILING = (Status.FAIL, Status.REFUSED, Status.ERROR, Status.CRASH, Status.TIMEOUT, Status.NONDETERMINISTIC)
# a failure, known or not: a defect's cases
DEFECTIVE = (*FAILING, Status.KNOWN)


class Unsupported(Exception):
    """Raised by a backend for a case it cannot express: `unsupported` where the case needs a
    capability the backend does not declare, `refused` (a failure) where it declares it."""


class AdapterLimit(Unsupported):
    """Raised by an adapter for a case it cannot lower into its framework faithfully (a request the
    framework's API has no way to say): a limit of the adapter, stated in the message. Its
    verdict is `unsupported` whatever the capabilities, counted and reported as the adapter's
    limit, never a defect of the framework's."""


LIMIT = "adapter limit: "  # how an `unsupported` verdict's message names an adapter's limit


@dataclass
class OpRecord:
    """One op of a backend's backward program, normalised for the structural invariants."""

    name: str
    added: bool  # made by the backward (not part of the forward)
    unused: bool  # no result of it is used, fetched or returned
    effects: bool = False  # side effects keep it alive (stack pushes and pops)
    zero_fill: bool = False  # a zero-fill op (`full_like`, `full` of zeros)
    depth: int = 0


@dataclass
class BackendResult:
    grads: list[np.ndarray | None]  # one per case.wrt, host arrays of the inputs' dtypes, None where none is returned
    version: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    backward_ops: list[OpRecord] | None = None  # where the backend exposes its backward program
    violations: list[str] = field(default_factory=list)  # invariants the adapter checked itself
    forward: list[np.ndarray] | None = None  # the backend's forward outputs, for the lowering check


@runtime_checkable
class Backend(Protocol):
    name: str
    capabilities: frozenset[str]  # "if", "while", "nesting", "inplace", "combine_split", "double_grad", ...
    version: str

    def run(self, case: Case) -> BackendResult: ...


@dataclass
class Verdict:
    status: Status
    oracle: str = ""
    message: str = ""
    inputs: list[str] = field(default_factory=list)  # inputs whose gradient is wrong
    max_abs: float = 0.0
    max_rel: float = 0.0
    expected: dict[str, Any] = field(default_factory=dict)  # input name -> gradient (lists)
    actual: dict[str, Any] = field(default_factory=dict)
    kind: str = ""  # of a failure: the kind of discrepancy (`defects.kind`)
    # of a failure: where its defect lives, an op and its use or a construct (`localize.py`), or
    # where it was met, for a failure no derived case shows (`defects.unlocalized`)
    culprit: str = ""

    @property
    def signature(self) -> str:
        """What names a failure's defect: its culprit and its kind (`defects.signature`)."""
        return f"{self.culprit} | {self.kind}"

    def to_json(self) -> dict[str, Any]:
        # shallow (asdict deep-copies every gradient list, for a record that is only serialised)
        return {name: getattr(self, name) for name in _VERDICT_FIELDS}


_VERDICT_FIELDS = [f.name for f in fields(Verdict)]
