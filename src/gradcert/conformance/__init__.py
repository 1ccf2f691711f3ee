"""Conformance: the backend protocol and verdicts (`api`), the oracles, certification areas, the
session and search, the pytest plugin, isolation and fuzzing. Backends are found by name in
`gradcert.backends`."""

from gradcert.conformance.api import Backend, BackendResult, OpRecord, Status, Unsupported, Verdict

__all__ = ["Backend", "BackendResult", "OpRecord", "Status", "Unsupported", "Verdict"]
