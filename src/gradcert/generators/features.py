"""Feature switches: what a drawn program may contain.

A certification area draws from its own mix, and a backend's declared capabilities narrow it.
With `swarm` on, each draw also switches a random subset of the enabled features off ("swarm
testing"), so that rare interactions are not drowned by the common ones; a test's `focus` features
are on more often than the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

FAMILIES = frozenset({"unary", "binary", "reduction", "matmul", "shape", "vector", "misc", "index", "along"})
CONSTRUCTS = frozenset(
    {
        "if",
        "while",
        "nested",
        "inplace",
        "fanout",
        "stop_gradient",
        "no_grad",
        "cotangents",
        "multi_output",
        "unreachable",
        "float32",
    }
)
ALL = FAMILIES | CONSTRUCTS
# Features that a certification area draws only where it names them (their own areas, `indexing`,
# `along_axis` and `float32`): the other areas' draws, and the defects on file from them, stay as
# they are. The full mix (`FULL`: fuzzing, `gradcert check`'s draws) has them all.
ALONE = frozenset({"index", "along", "float32"})
# A backend capability that a feature needs, when the backend may lack it.
NEEDS = {
    "if": "if",
    "while": "while",
    "nested": "nesting",
    "inplace": "inplace",
    "vector": "combine_split",
    "index": "indexing",
    "along": "along_axis",
    "float32": "float32",
}


@dataclass(frozen=True)
class Features:
    enabled: frozenset[str] = ALL
    max_ops: int = 8  # top-level steps; a step may be a whole branch or loop
    max_depth: int = 2  # nesting of if/while
    swarm: bool = True
    required: frozenset[str] = field(default_factory=frozenset)  # always on (a certification area's focus)
    # with swarm: these are each on in 3 draws of 4, the other features in 1 of 4 (none: all in 3 of 4);
    # a test's own mix comes first, and every other feature still meets it
    focus: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        unknown = (self.enabled | self.required) - ALL
        if unknown:
            raise ValueError(f"unknown feature(s): {', '.join(sorted(unknown))}")

    def narrow(self, capabilities: Iterable[str]) -> Features:
        """Drop the features whose capability the backend does not declare."""
        caps = set(capabilities)
        drop = {f for f, need in NEEDS.items() if need not in caps}
        return replace(self, enabled=self.enabled - drop, required=self.required - drop)

    def only(self, *names: str, required: Iterable[str] = ()) -> Features:
        return replace(self, enabled=frozenset(names) | frozenset(required), required=frozenset(required))

    def without(self, *names: str) -> Features:
        return replace(self, enabled=self.enabled - set(names), required=self.required - set(names))


FULL = Features()
