"""Mutation tests: the `quick` profile catches every deliberately wrong backend of tests/mutants.py.
Each runs `gradcert certify` for real, in a subprocess (crash and hang in worker processes)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from gradcert.conformance.verdicts import FAILING

from ..conftest import ENV, ROOT
from ..conftest import certify as run_certify

# mutant -> (areas to certify, the oracle or status expected to catch it)
CATCH: dict[str, tuple[str, str | set[str]]] = {
    # a dropped contribution leaves its op dead: the invariants see it before the values differ
    "DropFanout": ("fanout", {"reference", "invariants"}),
    "ZeroFillOnes": ("combine_split,if", "reference"),
    "IgnoreCotangents": ("cotangents", "reference"),
    "IgnoreNoGrad": ("no_grad", "semantics"),
    "IgnoreStopGradient": ("stop_gradient", "semantics"),
    # swapped branches read values of the other branch: the backward program itself errs, or differs
    "SwapIfBranches": ("if", {"reference", "error"}),
    "ForgetLoopAccumulation": ("while", "reference"),
    # reading a value after its in-place overwrite breaks the verifier's in-place rule
    "ReadOverwritten": ("inplace", {"reference", "invariants"}),
    "UnusedFullLike": ("elementwise", "invariants"),
    "ZerosForUnreachable": ("unreachable", "semantics"),
    "RelativeError": ("elementwise", "reference"),
    "WrongSinRule": ("elementwise,while", "reference"),  # sin squashes loop values: half the loop cases
    "CrashOnNesting": ("nesting", "crash"),
    "HangOnIf": ("if", "timeout"),
    # defects inside `if` and `while` bodies of backends that have known defects there
    # (tests/known/): the new one is caught, the known one is not what fails the run
    "KnownAndNewInLoops": ("while", "reference"),
    "KnownAndNewInIfs": ("if", "reference"),
}
# the quick profile draws a sin inside a taken branch too rarely for these: the certify profile's
# 500 cases of the area do (the known defect judged past: it does not hide the new one)
CERTIFY = {"KnownAndNewInIfs"}
# mutant -> (area, oracle or status): each wrong in one interaction of two coverage cells
INTERACTIONS: dict[str, tuple[str, str]] = {
    "ReductionInLoopBody": ("while", "reference"),
    "InplaceInBranch": ("inplace", "reference"),
    "BroadcastInLoop": ("while", "reference"),
    "ShapeOpAtRank4": ("reductions_shape", "reference"),
    "TransposeByItsPerm": ("reductions_shape", "error"),  # the cotangent's shape is wrong: the backward errs
    "StopGradientInBody": ("stop_gradient", "reference"),
    "NoGradInBranch": ("no_grad", "semantics"),
    "LongLoops": ("while", "reference"),
    "DataDependentTrips": ("while", "reference"),
}
KNOWN = str(ROOT / "tests" / "known")


def certify(backend: str, areas: str, tmp: Path, *extra: str) -> tuple[int, list[dict[str, object]], str]:
    """A quick certification of `areas`, unshrunk unless `--shrink` is among `extra`."""
    shrink = [x for x in extra if x != "--shrink"] + ([] if "--shrink" in extra else ["--no-shrink"])
    env = dict(ENV, GRADCERT_KNOWN_DEFECTS=KNOWN)
    r, records = run_certify(backend, tmp, extra=["--areas", areas, *shrink], env=env)
    return r.returncode, records, r.stdout + r.stderr


def test_there_are_at_least_12_mutants() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.mutants import MUTANTS

    assert len(MUTANTS) >= 16 and {m.__name__ for m in MUTANTS} == set(CATCH)  # (NoLoops is no mutant)


@pytest.mark.parametrize("mutant", sorted(CATCH))
def test_quick_profile_catches_mutant(mutant: str, tmp_path: Path) -> None:
    areas, expected = CATCH[mutant]
    caught_by = {expected} if isinstance(expected, str) else expected
    isolate = ["--isolate", "yes", "--timeout", "1"] if caught_by & {"crash", "timeout"} else ["--isolate", "no"]
    profile = ["--profile", "certify"] if mutant in CERTIFY else []
    code, records, out = certify(f"tests.mutants:{mutant}", areas, tmp_path, *isolate, *profile)
    assert code == 1, out[-3000:]
    bad = [r for r in records if r.get("status") in FAILING and "defect" not in r]
    assert bad, out[-3000:]
    kinds = Counter(r["oracle"] if r["status"] == "fail" else r["status"] for r in bad)
    assert caught_by & set(kinds), kinds
    # every failing case names its defect and replays by its draw; each defect is saved once per
    # test that met it, as a case file with its replay command
    assert all(r["signature"] and str(r["replay"]).startswith("gradcert replay 'test_") for r in bad)
    defects = [r for r in records if "defect" in r]
    assert {d["defect"] for d in defects} == {r["signature"] for r in bad}
    assert all(Path(str(d["case_file"])).exists() and "gradcert replay" in str(d["replay"]) for d in defects)
    assert len(list((tmp_path / "findings").rglob("*.case"))) == len({d["case_file"] for d in defects})


def test_failure_report_is_the_shrunk_case_not_a_traceback(tmp_path: Path) -> None:
    """The terminal shows each defect once: its signature, the shrunk case and its replay command;
    no traceback through gradcert, hypothesis and pytest, no hypothesis blob, no object reprs."""
    code, records, out = certify("tests.mutants:DropFanout", "fanout", tmp_path, "--isolate", "no", "--shrink")
    assert code == 1, out[-3000:]
    blocks = [b for b in out.split("\n\n") if b.startswith("NEW ")]
    defects = [r for r in records if "defect" in r]
    assert blocks and len(blocks) == len({d["defect"] for d in defects}), out
    for b in blocks:
        sig = b.splitlines()[0].split(": ", 1)[1].split("  (")[0]
        smallest = min((d for d in defects if d["defect"] == sig), key=lambda d: d["size"])
        program = str(smallest["case"]).split("---")[0].strip()
        # a dropped contribution localized: the ops reading a value twice, or its readers, or the
        # loop around them; a defect no derived case shows is shrunk
        assert smallest["shrunk"] and "\n".join("  " + x for x in program.splitlines()) in b, b
        culprit = sig.split(" | ")[0]
        assert smallest["size"] <= 3 or "while" in culprit or "if" in culprit or culprit.startswith("unlocalized"), b
        assert f"replay: {smallest['replay']}" in b
    assert "accumulation of a value read by several ops" in out or "a value read twice by one op" in out
    for noise in ("Traceback", "raise CaseFailed", "areas.py", "reproduce_failure", "object at 0x", "Case(program="):
        assert noise not in out, noise


def test_there_are_at_least_8_interaction_mutants() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.mutants import INTERACTION_MUTANTS

    assert len(INTERACTION_MUTANTS) >= 8 and {m.__name__ for m in INTERACTION_MUTANTS} == set(INTERACTIONS)


@pytest.mark.parametrize("mutant", sorted(INTERACTIONS))
def test_certify_profile_catches_interaction_mutant(mutant: str, tmp_path: Path) -> None:
    """A defect where two features meet: the certify profile's draws meet it, in its area."""
    area, expected = INTERACTIONS[mutant]
    code, records, out = certify(f"tests.mutants:{mutant}", area, tmp_path, "--isolate", "no", "--profile", "certify")
    assert code == 1, out[-3000:]
    bad = [r for r in records if r.get("status") in FAILING and "defect" not in r]
    assert expected in {r["oracle"] if r["status"] == "fail" else r["status"] for r in bad}, out[-3000:]
    assert all(str(r["replay"]).startswith("gradcert replay 'test_") for r in bad)
