"""Where a generator's choices come from: hypothesis (recorded, so a failure shrinks) or a seeded
NumPy generator (the fast path). The construction code is one and the same for both, so both
draw the same distribution; every choice shrinks towards its first / smallest option."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

T = TypeVar("T")


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...
    def choice(self, options: Sequence[T]) -> T: ...
    def flag(self, p: float) -> bool: ...  # True with probability p; shrinks to False
    def uniform(self, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray: ...
    def note(self, event: str) -> None: ...


class Seeded:
    """The fast path: choices from `numpy.random.Generator(PCG64(seed))`, identical across processes.
    Scalar choices come from a buffer of uniforms drawn in blocks (one NumPy call per 64 choices,
    not one each: a NumPy call costs ~1.5 us, half a small case's drawing)."""

    BLOCK = 64

    def __init__(self, seed: int) -> None:
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.buf: list[float] = []

    def _u(self) -> float:
        if not self.buf:
            self.buf = self.rng.random(self.BLOCK).tolist()[::-1]
        return self.buf.pop()

    def integer(self, lo: int, hi: int) -> int:
        return lo + int(self._u() * (hi - lo + 1))

    def choice(self, options: Sequence[T]) -> T:
        return options[int(self._u() * len(options))]

    def flag(self, p: float) -> bool:
        return self._u() < p

    def uniform(self, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
        # rounded to 1/64 so that case files print short, exact numbers
        return np.asarray(np.round(self.rng.uniform(lo, hi, shape) * 64) / 64)

    def note(self, event: str) -> None:
        pass


class Drawn:
    """Choices drawn from hypothesis's `data`, so that every one is recorded and shrinks.

    A draw costs tens of microseconds in hypothesis; a third of it went to unwrapping the lazy
    strategy again at every draw: strategies are made and unwrapped once (`_integers`). (Drawing a
    group of choices as one integer, its digits the members, cut the draws by half but made
    shrinking worse: tests/test_generators.py's planted failure shrank to 7 ops and 12, not 5.)
    """

    def __init__(self, data: Any) -> None:
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return int(self.data.draw(_integers(lo, hi)))

    def choice(self, options: Sequence[T]) -> T:
        return options[self.integer(0, len(options) - 1)]

    def flag(self, p: float) -> bool:
        k = self.integer(0, 99)
        return k >= 100 - round(100 * p)

    def uniform(self, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(shape)) if shape else 1
        # integers on a 1/64 grid: they shrink to lo's neighbourhood's simplest values and print exactly
        k = self.data.draw(_lists(round(lo * 64), round(hi * 64), n))
        return (np.asarray(k, dtype=np.float64) / 64).reshape(shape)

    def note(self, event: str) -> None:
        from hypothesis import event as hevent

        try:
            hevent(event)
        except Exception:  # outside a hypothesis test (e.g. find()): no statistics to keep
            pass


def _unwrapped(s: Any) -> Any:
    # the strategy behind hypothesis's lazy wrapper, which it would unwrap again at every draw
    return getattr(s, "wrapped_strategy", s)


@functools.cache
def _integers(lo: int, hi: int) -> Any:
    from hypothesis import strategies as st

    return _unwrapped(st.integers(lo, hi))


@functools.cache
def _lists(lo: int, hi: int, n: int) -> Any:
    from hypothesis import strategies as st

    return _unwrapped(st.lists(_integers(lo, hi), min_size=n, max_size=n))


class DrawAdapter:
    """Gives a composite strategy's `draw` the `data.draw` interface that `Drawn` expects."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
