"""Generators: valid random programs with every feature, as hypothesis strategies and as a seeded
fast path drawing the same distribution."""

from typing import Any

from gradcert.generators.case import Case, CaseFileError, describe, load_case, parse_case
from gradcert.generators.fast import draw_case
from gradcert.generators.features import ALL, CONSTRUCTS, FAMILIES, FULL, Features


def __getattr__(name: str) -> Any:
    # the hypothesis strategies import hypothesis (0.2 s): only when asked for (certify draws with
    # the seeded generator and needs hypothesis only to shrink a failure)
    if name == "cases":
        from gradcert.generators.strategies import cases

        return cases
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALL",
    "CONSTRUCTS",
    "FAMILIES",
    "FULL",
    "Case",
    "CaseFileError",
    "Features",
    "cases",
    "describe",
    "draw_case",
    "load_case",
    "parse_case",
]
