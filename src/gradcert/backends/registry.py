"""Finding backends: built-in names, entry points in group `gradcert.backends`, or
`module:attribute`. Light to import (no NumPy, no IR): certify's own process only checks the name
before it starts pytest's workers, which import the backend (built-in ones, and their
frameworks, are imported only when asked for)."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from importlib.metadata import entry_points

from gradcert.backends.protocol import Backend

GROUP = "gradcert.backends"


class UnknownBackend(Exception):
    """A backend name that is not built in, not an entry point and not `module:attribute`."""


BUILTIN = {
    "reference": "gradcert.backends.reference:ReferenceBackend",
    "paddle": "gradcert.backends.paddle:PaddleBackend",
    "torch": "gradcert.backends.torch:TorchBackend",
    "jax": "gradcert.backends.jax:JaxBackend",
    "jax-eager": "gradcert.backends.jax:JaxEagerBackend",
    "jax-jit": "gradcert.backends.jax:JaxJitBackend",
    "tensorflow": "gradcert.backends.tensorflow:TensorflowBackend",
}
# what each built-in backend's framework needs installed: (module, distribution), the first named
# in the backend's version; the extra to install is the backend's name
NEEDS = {
    "paddle": [("paddle", "paddlepaddle")],
    "torch": [("torch", "torch"), ("array_api_compat", "array-api-compat")],
    "jax": [("jax", "jax")],
    "jax-eager": [("jax", "jax")],
    "jax-jit": [("jax", "jax")],
    "tensorflow": [("tensorflow", "tensorflow-cpu")],
}


def framework_version(backend: str) -> str:
    """The name and version of a built-in backend's framework, read without importing it (a
    backend whose cases run in a worker process is only asked its name and capabilities where
    certify runs: importing Paddle, PyTorch or JAX there cost a second or more); ImportError
    naming the extra to install where something it needs is missing."""
    for module, distribution in NEEDS[backend]:
        if importlib.util.find_spec(module) is None:
            raise ImportError(
                f"the {backend} backend needs {distribution}: pip install 'gradcert[{backend.partition('-')[0]}]'"
            )
    module, distribution = NEEDS[backend][0]
    try:
        return f"{distribution} {importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        # the module from another distribution of the framework (`tensorflow` for `tensorflow-cpu`)
        other = importlib.metadata.packages_distributions().get(module, [distribution])[0]
        return f"{other} {importlib.metadata.version(other)}"


def backend_name(spec: str) -> str:
    """The name of the backend `spec`, checked as `resolve` checks it; a built-in one is not
    imported (certify's own process starts pytest's workers sooner without NumPy and the IR).
    Raises UnknownBackend with a one-line reason."""
    if spec not in BUILTIN:
        return resolve(spec).name
    if spec in NEEDS:
        try:
            framework_version(spec)
        except ImportError as e:
            raise UnknownBackend(f"backend {spec!r} cannot start: {e}") from None
    return spec


DEVICES = ("cpu", "gpu")


def resolve(spec: str, device: str = "cpu") -> Backend:
    """The backend named `spec`, set to run its cases on `device` ("cpu" or "gpu"); raises
    UnknownBackend with a one-line reason (a device the backend does not declare in `devices`, or
    one its `use_device(device)` finds missing, included)."""
    if ":" in spec or spec in BUILTIN:
        mod, _, attr = BUILTIN.get(spec, spec).partition(":")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise UnknownBackend(f"cannot load backend {spec!r}: {e}") from None
        except Exception as e:  # a module that fails as it is imported (a syntax error, a raise): say where
            where = f" ({e.filename}:{e.lineno})" if isinstance(e, SyntaxError) else ""
            said = e.args[0] if e.args else e
            raise UnknownBackend(f"cannot load backend {spec!r}: {type(e).__name__}: {said}{where}") from None
    else:
        found = [ep for ep in entry_points(group=GROUP) if ep.name == spec]
        if not found:
            known = sorted(set(BUILTIN) | {ep.name for ep in entry_points(group=GROUP)})
            raise UnknownBackend(f"unknown backend {spec!r} (known: {', '.join(known)}; or use module:attribute)")
        try:
            obj = found[0].load()
        except Exception as e:  # a broken third-party package: say which
            raise UnknownBackend(f"backend {spec!r} failed to load: {type(e).__name__}: {e}") from None
    try:
        backend = obj() if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "run")) else obj
    except ImportError as e:  # a built-in backend whose framework is not installed
        raise UnknownBackend(f"backend {spec!r} cannot start: {e}") from None
    if not isinstance(backend, Backend):
        raise UnknownBackend(f"{spec!r} is not a backend (needs name, capabilities, version and run(case))")
    if device not in DEVICES:
        raise UnknownBackend(f"unknown device {device!r} (expected {' or '.join(DEVICES)})")
    if device != "cpu":
        declared = getattr(backend, "devices", ("cpu",))
        if device not in declared:
            raise UnknownBackend(f"backend {spec!r} does not run on {device} (it declares {', '.join(declared)})")
        try:
            backend.use_device(device)  # type: ignore[attr-defined]
        except Exception as e:  # the device, its driver or the framework's build for it is missing
            raise UnknownBackend(f"backend {spec!r} cannot run on {device}: {' '.join(str(e).split())}") from None
    return backend
