"""Conformance: backends, oracles, certification areas, the pytest plugin and the runner."""

from typing import TYPE_CHECKING, Any

from .api import Backend, BackendResult, OpRecord, Unsupported, Verdict
from .backends import UnknownBackend, resolve

if TYPE_CHECKING:
    from .reference_backend import ReferenceBackend

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


def __getattr__(name: str) -> Any:
    # the reference backend (NumPy, the IR) only when asked for: importing this package stays light
    if name == "ReferenceBackend":
        from .reference_backend import ReferenceBackend

        return ReferenceBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
