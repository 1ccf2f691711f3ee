"""Generators: valid random programs with every feature, as hypothesis strategies and as a seeded
fast path drawing the same distribution."""

from .case import Case, CaseFileError, describe, load_case, parse_case
from .fast import draw_case
from .features import ALL, CONSTRUCTS, FAMILIES, FULL, Features
from .strategies import cases

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
