"""What the oracles say of a backend's answer: a case's `Verdict` and its `Status`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any


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


LIMIT = "adapter limit: "  # how an `unsupported` verdict's message names an adapter's limit


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
