"""The seeded fast path: the same construction as the hypothesis strategies, fed by a seeded
generator (`choices.Seeded`), for throughput-bound fuzzing. The same seed gives the same case,
byte for byte, in any process."""

from __future__ import annotations

from gradcert.generators.build import Generator
from gradcert.generators.case import Case
from gradcert.generators.choices import Seeded
from gradcert.generators.features import FULL, Features


def draw_case(seed: int, features: Features = FULL) -> Case:
    case = Generator(Seeded(seed), features).case()
    case.seed = seed
    return case
