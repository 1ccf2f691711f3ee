"""Types of IR values: tensors, vectors (tuples of tensors) and stacks (saved per-iteration values)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DTYPES = ("f64", "f32", "i64", "bool")
FLOAT_DTYPES = frozenset({"f64", "f32"})
_XP_NAMES = {"f64": "float64", "f32": "float32", "i64": "int64", "bool": "bool"}


def xp_dtype(xp: object, dtype: str) -> Any:
    """The array namespace's dtype object for one of our dtype names."""
    return getattr(xp, _XP_NAMES[dtype])


class TensorType:
    """A tensor's shape and dtype. Interned: equal types are one object (`TensorType((3,)) is
    TensorType((3,))`), so comparing and hashing them is by identity, in C. Types are compared and
    hashed wherever ops are built, checked and looked up (the verifier's table of signatures found
    good is keyed by them); as a frozen dataclass each comparison and hash ran Python code."""

    __slots__ = ("shape", "dtype")
    shape: tuple[int, ...]
    dtype: str
    _interned: dict[tuple[object, str], TensorType] = {}

    def __new__(cls, shape: Sequence[int], dtype: str = "f64") -> TensorType:
        try:
            return cls._interned[shape, dtype]
        except (KeyError, TypeError):  # (TypeError: a list, unhashable)
            pass
        shape = tuple(shape)
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}")
        if any((not isinstance(d, int)) or d < 0 for d in shape):
            raise ValueError(f"bad shape {shape!r}")
        t = object.__new__(cls)
        object.__setattr__(t, "shape", tuple(int(d) for d in shape))
        object.__setattr__(t, "dtype", dtype)
        return cls._interned.setdefault((t.shape, dtype), t)  # (a race: the first one made wins)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"TensorType is immutable: cannot set {name!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return TensorType, (self.shape, self.dtype)  # (pickled and copied through the interning)

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

    def __repr__(self) -> str:
        return f"TensorType(shape={self.shape!r}, dtype={self.dtype!r})"


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
