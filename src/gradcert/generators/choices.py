"""Where a generator's choices come from: a seeded `random.Random` (how certify draws, and the fast
path) or hypothesis (which replays a seeded case's choices and shrinks them). The construction code
is one and the same for both, and so are the choices it makes; every choice shrinks towards its
first / smallest option."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

T = TypeVar("T")


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...
    def choice(self, options: Sequence[T]) -> T: ...
    def flag(self, p: float) -> bool: ...  # True with probability p; shrinks to False
    def uniform(self, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray: ...
    def note(self, event: str) -> None: ...
    # `fn()`'s choices belong together (a step): hypothesis's shrinker may drop them whole
    def span(self, fn: Callable[[], T]) -> T: ...


class _Integers:
    """Every choice an integer in a range: `Seeded` and `Drawn` make the same ones from the same
    calls, which is what lets a seeded case be handed to hypothesis choice for choice."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, options: Sequence[T]) -> T:
        return options[self.integer(0, len(options) - 1)]

    def flag(self, p: float) -> bool:
        return self.integer(0, 99) >= 100 - round(100 * p)


class Seeded(_Integers):
    """The fast path: choices from Python's `random.Random(seed)` (Mersenne Twister, whose
    `random()` is the same sequence for the same seed on every platform and Python version).

    Every choice is an integer in a range, as `Drawn` makes it, and is kept in `choices`: the
    sequence hypothesis would record for the same case, so that a case found here can be handed to
    hypothesis to shrink (`conformance/judging.py`). (NumPy's generator costs more to seed and to
    call for a handful of integers than drawing a small case can afford: `bench/generation.py`.)"""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed).random
        self.choices: list[int] = []

    def integer(self, lo: int, hi: int) -> int:
        k = lo + int(self.random() * (hi - lo + 1))
        self.choices.append(k)
        return k

    # (the same choices as `_Integers` makes them, without its call of `integer`: tens of them a case)
    def choice(self, options: Sequence[T]) -> T:
        k = int(self.random() * len(options))
        self.choices.append(k)
        return options[k]

    def flag(self, p: float) -> bool:
        k = int(self.random() * 100)
        self.choices.append(k)
        return k >= 100 - round(100 * p)

    def uniform(self, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
        a = round(lo * 64)
        n = round(hi * 64) - a + 1
        r = self.random
        k = [a + int(r() * n) for _ in range(math.prod(shape))]
        self.choices += k
        return (np.array(k, dtype=np.float64) / 64).reshape(shape)

    def note(self, event: str) -> None:
        pass

    def span(self, fn: Callable[[], T]) -> T:
        return fn()


class Simplest(Seeded):
    """Every choice its simplest, the one hypothesis shrinks it towards (0, or the bound nearest
    0): the smallest case there is, which hypothesis draws first too (first family, first op,
    zero inputs)."""

    def __init__(self) -> None:
        super().__init__(0)

    choice = _Integers.choice
    flag = _Integers.flag

    def integer(self, lo: int, hi: int) -> int:
        k = min(max(0, lo), hi)
        self.choices.append(k)
        return k

    def uniform(self, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
        k = np.full(shape, self.integer(round(lo * 64), round(hi * 64)))
        self.choices += [self.choices[-1]] * (k.size - 1)
        return np.asarray(k / 64, dtype=np.float64)


class Drawn(_Integers):
    """Choices drawn from hypothesis's `data`, so that every one is recorded and shrinks.

    A draw costs tens of microseconds in hypothesis; a third of it went to unwrapping the lazy
    strategy again at every draw: strategies are made and unwrapped once (`_integers`). (Drawing a
    group of choices as one integer, its digits the members, cut the draws by half but made
    shrinking worse: tests/generators/test_generators.py's planted failure shrank to 7 ops and 12, not 5.)
    """

    def __init__(self, data: Any) -> None:
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return int(self.data.draw(_integers(lo, hi)))

    def uniform(self, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
        # integers on a 1/64 grid: they shrink to lo's neighbourhood's simplest values and print
        # exactly (a list of fixed size: its choices are its members', as `Seeded` keeps them)
        n = int(np.prod(shape)) if shape else 1
        k = self.data.draw(_lists(round(lo * 64), round(hi * 64), n))
        return (np.asarray(k, dtype=np.float64) / 64).reshape(shape)

    def span(self, fn: Callable[[], T]) -> T:
        return self.data.draw(_span(fn))  # type: ignore[no-any-return]

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


def _span(fn: Callable[[], Any]) -> Any:
    from hypothesis import strategies as st

    # a strategy drawn is a span of hypothesis's choices; `fn` draws through the outer `data`
    return _unwrapped(st.builds(fn))


class DrawAdapter:
    """Gives a composite strategy's `draw` the `data.draw` interface that `Drawn` expects."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
