"""Conformance: backends, oracles, certification areas, the pytest plugin and the runner."""

from .api import Backend, BackendResult, OpRecord, Unsupported, Verdict
from .backends import ReferenceBackend, UnknownBackend, resolve

__all__ = [
    "Backend",
    "BackendResult",
    "OpRecord",
    "ReferenceBackend",
    "UnknownBackend",
    "Unsupported",
    "Verdict",
    "resolve",
]
