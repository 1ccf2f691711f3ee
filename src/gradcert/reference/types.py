"""Types of IR values: tensors, vectors (tuples of tensors) and stacks (saved per-iteration values)."""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("f64", "f32", "i64", "bool")
FLOAT_DTYPES = frozenset({"f64", "f32"})
_XP_NAMES = {"f64": "float64", "f32": "float32", "i64": "int64", "bool": "bool"}


def xp_dtype(xp: object, dtype: str) -> object:
    """The array namespace's dtype object for one of our dtype names."""
    return getattr(xp, _XP_NAMES[dtype])


@dataclass(frozen=True, slots=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str = "f64"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}")
        if any((not isinstance(d, int)) or d < 0 for d in self.shape):
            raise ValueError(f"bad shape {self.shape!r}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True, slots=True)
class VectorType:
    """A tuple of tensors, made by `combine` and taken apart by `split`."""

    elems: tuple[TensorType, ...]

    def __str__(self) -> str:
        return f"vec<{', '.join(map(str, self.elems))}>"


@dataclass(frozen=True, slots=True)
class StackType:
    """A LIFO stack of tuples, used by the backward of control flow to save forward values."""

    elems: tuple[Type, ...]

    def __str__(self) -> str:
        return f"stack<{', '.join(map(str, self.elems))}>"


Type = TensorType | VectorType | StackType


def is_differentiable(t: Type) -> bool:
    """Values of this type carry cotangents: float tensors, and vectors of them."""
    if isinstance(t, TensorType):
        return t.dtype in FLOAT_DTYPES
    if isinstance(t, VectorType):
        return all(e.dtype in FLOAT_DTYPES for e in t.elems)
    return False


def f64(*shape: int) -> TensorType:
    return TensorType(tuple(shape), "f64")


def i64(*shape: int) -> TensorType:
    return TensorType(tuple(shape), "i64")


def boolean(*shape: int) -> TensorType:
    return TensorType(tuple(shape), "bool")
