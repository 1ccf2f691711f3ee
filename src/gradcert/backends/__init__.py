"""Backends: the built-in ones (the reference, Paddle, PyTorch, JAX), the lowering the framework
ones share, and the registry that finds a backend by name, entry point or `module:attribute`.

The conformance layer reaches this package in two places only: the registry, to turn a backend's
name into a backend (importing it then), and the reference backend, whose answers the oracles
expect."""

from typing import TYPE_CHECKING, Any

from gradcert.backends.registry import UnknownBackend, resolve

if TYPE_CHECKING:
    from gradcert.backends.reference import ReferenceBackend

__all__ = ["ReferenceBackend", "UnknownBackend", "resolve"]


def __getattr__(name: str) -> Any:
    # the reference backend (NumPy, the IR) only when asked for: importing this package stays light
    if name == "ReferenceBackend":
        from gradcert.backends.reference import ReferenceBackend

        return ReferenceBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
