"""Backend results as JSON, for worker processes and results files (floats exact)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np

from gradcert.backends.protocol import BackendResult, OpRecord

_OP_FIELDS = [f.name for f in fields(OpRecord)]


def array_to_json(x: np.ndarray | None) -> Any:
    if x is None:
        return None
    x = np.asarray(x)
    return {"dtype": str(x.dtype), "shape": list(x.shape), "data": x.ravel().tolist()}


def array_from_json(d: Any) -> np.ndarray | None:
    if d is None:
        return None
    return np.asarray(d["data"], dtype=d["dtype"]).reshape(d["shape"])


def result_to_json(r: BackendResult) -> dict[str, Any]:
    return {
        "grads": [array_to_json(g) for g in r.grads],
        "version": r.version,
        "timings": r.timings,
        # one row per op, its fields in order (`asdict` deep-copies each row of a long listing)
        "backward_ops": None
        if r.backward_ops is None
        else [[getattr(op, f) for f in _OP_FIELDS] for op in r.backward_ops],
        "violations": r.violations,
        "forward": None if r.forward is None else [array_to_json(y) for y in r.forward],
    }


def result_from_json(d: dict[str, Any]) -> BackendResult:
    return BackendResult(
        [array_from_json(g) for g in d["grads"]],
        d.get("version", ""),
        d.get("timings", {}),
        None if d.get("backward_ops") is None else [OpRecord(*row) for row in d["backward_ops"]],
        list(d.get("violations", [])),
        None if d.get("forward") is None else [array_from_json(y) for y in d["forward"]],  # type: ignore[misc]
    )
