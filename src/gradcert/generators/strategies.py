"""Hypothesis strategies for cases (program + inputs + gradient request).

`cases(features)` draws with every choice recorded, so a failing case shrinks: steps are dropped
(each follows a "go on" flag that shrinks to "stop"), each menu choice goes to its first entry
(the simplest family and op), operands to the newest value in the pool, swarm switches to "on"
(so no feature is hidden from a smaller program), loop trip counts to 0 and input elements to 0.
Shrunk cases are programs of a few ops that still hold the failure.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from gradcert.generators.build import Generator
from gradcert.generators.case import Case
from gradcert.generators.choices import DrawAdapter, Drawn
from gradcert.generators.features import FULL, Features


@st.composite
def _cases(draw: Any, features: Features) -> Case:
    return Generator(Drawn(DrawAdapter(draw)), features).case()


def cases(features: Features = FULL) -> st.SearchStrategy[Case]:
    """Cases drawn from `features`; shrinks as the module docstring says."""
    return _cases(features)
