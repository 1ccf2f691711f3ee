"""Hypothesis strategies for cases (program + inputs + gradient request).

`cases(features)` draws with every choice recorded, so a failing case shrinks: the number of
steps to 1, each menu choice to its first entry (the simplest op), swarm switches to "off",
values to the newest in the pool, input elements to 0. Shrunk cases are small programs of a few
ops that still hold the failure.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .build import Generator
from .case import Case
from .choices import DrawAdapter, Drawn
from .features import FULL, Features


@st.composite
def _cases(draw: Any, features: Features) -> Case:
    return Generator(Drawn(DrawAdapter(draw)), features).case()


def cases(features: Features = FULL) -> st.SearchStrategy[Case]:
    """Cases drawn from `features`; shrinks as the module docstring says."""
    return _cases(features)
