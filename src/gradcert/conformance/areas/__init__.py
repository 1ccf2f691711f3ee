"""The certification areas: which features each draws from, which capabilities it needs.

Each area is a test module `gradcert/conformance/areas/test_<area>.py` of small tests, so that
pytest-xdist can spread them. A test is marked with the features its cases are drawn from
(`drawn`), and its body asks the `gradcert` fixture (`Certify`) for the check its cases get; the
cases are drawn as `judging.py` says.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # (the generators are imported where cases are drawn: certify's own process draws none)
    from gradcert.generators import Case
    from gradcert.generators.features import Features


_Test = TypeVar("_Test", bound=Callable[..., None])


@dataclass(frozen=True)
class Area:
    name: str
    title: str
    needs: frozenset[str] = frozenset()  # backend capabilities
    order: int = 1
    # what its cases are judged by: "gradients", "linearity" or "bad_request" (a test's body asks
    # for it by name, `Certify`; a saved case, replayed, is judged by its area's)
    check: str = "gradients"


AREAS = {
    a.name: a
    for a in [
        Area("elementwise", "elementwise and broadcasting"),
        Area("reductions_shape", "reductions and shape ops"),
        Area("indexing", "indexing with duplicate indices and slice assignment", frozenset({"indexing"})),
        Area("along_axis", "softmax family, scans and selections along an axis", frozenset({"along_axis"})),
        Area("float32", "float32 programs, and casts to and from float64", frozenset({"float32"})),
        Area("matmul", "matmul"),
        Area("fanout", "fan-out accumulation"),
        Area("combine_split", "combine/split and vector ops", frozenset({"combine_split"})),
        Area("if", "if", frozenset({"if"})),
        Area("while", "while", frozenset({"while"})),
        Area("nesting", "nested control flow", frozenset({"if", "while", "nesting"})),
        Area("inplace", "in-place nets", frozenset({"inplace"})),
        Area("stop_gradient", "stop_gradient"),
        Area("no_grad", "no-grad set"),
        Area("cotangents", "explicit cotangents (and linearity in them)", check="linearity"),
        Area("multi_output", "several outputs"),
        Area("unreachable", "unreachable inputs"),
        Area("second_order", "second order", frozenset({"double_grad"}), order=2),
        Area("bad_requests", "bad requests", check="bad_request"),
        # the parameter-list API: one loss, every input that takes a gradient a parameter
        Area("append_backward", "append_backward with parameters", frozenset({"append_backward"})),
    ]
}


_BASIC = ("unary", "binary")
_FLOW = ("unary", "binary", "if", "while")


def feats(
    *required: str, focus: tuple[str, ...] = (), without: tuple[str, ...] = (), depth: int = 2, ops: int = 6
) -> Features:
    """A test's draws: every feature but those `without` may be in a case, and `required` ones are
    in every case; swarm switches pick, per draw, which others are on: those of the test's `focus`
    mostly, the rest now and then (`Features.focus`). `depth` nests if/while, `ops` top-level steps.
    The families a test does not name among `ALONE` (`features.py`) are left out: their own areas
    draw them."""
    from gradcert.generators.features import ALL, ALONE, Features

    named = frozenset(required) | frozenset(focus)
    enabled = ALL - frozenset(without) - (ALONE - named)
    return Features(enabled, ops, depth, True, frozenset(required), frozenset(focus))


def strategy(features: Features, order: int) -> Any:
    """The hypothesis strategy drawing the cases of `features` that `judging.draw` draws."""
    from hypothesis import strategies as st

    return st.deferred(lambda: _strategy(features, order))


def _strategy(features: Features, order: int) -> Any:
    from hypothesis import strategies as st

    from gradcert.generators.choices import DrawAdapter, Drawn
    from gradcert.generators.second_order import second_order
    from gradcert.generators.strategies import cases

    if order == 1:
        return cases(features)

    @st.composite
    def second(draw: Any) -> Case:
        case = draw(cases(features))
        return second_order(case, Drawn(DrawAdapter(draw)))

    return second()


@functools.cache
def tests() -> dict[str, Callable[..., None]]:
    """Every certification test by its id ("test_<area>.py::<test>"), in area order (made once:
    `judging.redraw` asks for every pass a report or bench draws again)."""
    import importlib

    out = {}
    for area in AREAS:
        module = importlib.import_module(f"{__package__}.test_{area}")
        out.update({f"test_{area}.py::{n}": f for n, f in vars(module).items() if hasattr(f, "_gradcert_area")})
    return out


def spec(test_id: str) -> tuple[Area, Features, str]:
    """The area, features and key (its seeds' and database entries' name) of a certification test."""
    test: Any = tests()[test_id]
    return test._gradcert_area, test._gradcert_features, test._gradcert_key


def test_id(item: Any) -> str:
    """`test_<area>.py::<test>`: the same however pytest was pointed at the package."""
    return f"{item.module.__name__.rsplit('.', 1)[-1]}.py::{item.name}"


def drawn(area: str, features: Features) -> Callable[[_Test], _Test]:
    """Marks a certification test of `area` whose cases are drawn from `features` (narrowed to the
    backend's capabilities when it runs). Its body names the check its cases get (`Certify`)."""
    spec = AREAS[area]
    # (sorted: a frozenset's order changes from process to process)
    key = (
        f"{area}/{sorted(features.enabled)}/{sorted(features.required)}/{sorted(features.focus)}/"
        f"{features.max_ops}/{features.max_depth}"
    )

    def mark(test: _Test) -> _Test:
        test._gradcert_area = spec  # type: ignore[attr-defined]
        test._gradcert_features = features  # type: ignore[attr-defined]
        test._gradcert_key = key  # type: ignore[attr-defined]
        return test

    return mark


class Certify:
    """What a certification test's body calls (the `gradcert` fixture): one method per check. Each
    draws the test's cases (`judging.Search`) and judges every one in the session."""

    def __init__(self, session: Any, search: Any, node: Any) -> None:
        self.session, self.search, self.node = session, search, node

    def gradients(self) -> None:
        """Every case's gradients against the reference backward and finite differences, and the
        backward program's invariants where the backend shows it."""
        self._judge("gradients")

    def linearity(self) -> None:
        """As `gradients`, and the gradients linear in the cotangents (a third request, with the
        sum of two cotangents)."""
        self._judge("linearity")

    def bad_request(self) -> None:
        """A cotangent of the wrong shape refused with an error, never answered."""
        self._judge("bad_request")

    def _judge(self, check: str) -> None:
        test = self.node.function
        area: Area = test._gradcert_area
        if check != area.check:  # (a case file names its area: replaying it judges by the area's check)
            raise TypeError(
                f"{test_id(self.node)} asks for {check}, but area {area.name}'s cases are judged by {area.check}"
            )
        features = test._gradcert_features.narrow(self.session.capabilities)
        draws = partial(strategy, features, area.order)
        self.search.run(self.session, test_id(self.node), area, features, test._gradcert_key, draws)


# The pytest that certifies loads only the plugins it needs (gradcert's, and xdist's for workers),
# not every plugin installed beside it: each would cost its import in every worker (0.7 s here).
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def command_line(
    areas: list[str],
    backend: str,
    profile: str,
    results: str,
    findings: str,
    isolate: str,
    timeout: float,
    workers: str = "1",
    device: str = "cpu",
) -> list[str]:
    """The pytest command line (after `pytest`, run with `PYTEST_ENV`) that runs `areas` against
    `backend`."""
    parallel = workers not in ("", "1")
    args = [
        "-p",
        "gradcert.conformance.plugin",
        *(["-p", "xdist.plugin"] if parallel else []),
        "--pyargs",
        *(f"gradcert.conformance.areas.test_{a}" for a in areas),
        "-p",
        "no:cacheprovider",
        "-q",
        "-W",
        "ignore::DeprecationWarning",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",  # hypothesis is imported before pytest starts
        "--rootdir",
        ".",
        "-c",
        "/dev/null",
        "--gradcert-backend",
        backend,
        "--gradcert-profile",
        profile,
        "--gradcert-results",
        results,
        "--gradcert-findings",
        findings,
        "--gradcert-isolate",
        isolate,
        "--gradcert-timeout",
        str(timeout),
        "--gradcert-device",
        device,
    ]
    # xdist keeps a worker two tests ahead (its test and the next); by default it refills a worker
    # with up to a quarter of what is left, so that the light tests at the end could wait behind a
    # heavy one on one worker while the other idled: one at a time
    return args + (["-n", workers, "--maxschedchunk", "1"] if parallel else [])
