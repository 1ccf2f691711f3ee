"""Mutation tests: the `quick` profile catches every deliberately wrong backend of tests/mutants.py.
Each runs `gradcert certify` for real, in a subprocess (crash and hang in worker processes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from .conftest import ROOT

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
}


def certify(backend: str, areas: str, tmp: Path, *extra: str) -> tuple[int, list[dict[str, object]], str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gradcert.cli",
            "certify",
            "--backend",
            backend,
            "--profile",
            "quick",
            "--areas",
            areas,
            "--results",
            str(tmp / "r.jsonl"),
            "--report",
            str(tmp / "r.html"),
            "--findings",
            str(tmp / "findings"),
            *(x for x in extra if x != "--shrink"),
            *([] if "--shrink" in extra else ["--no-shrink"]),
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = (tmp / "r.jsonl").read_text().splitlines() if (tmp / "r.jsonl").exists() else []
    return r.returncode, [json.loads(x) for x in lines], r.stdout + r.stderr


def test_there_are_at_least_12_mutants() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.mutants import MUTANTS

    assert len(MUTANTS) >= 12 and {m.__name__ for m in MUTANTS} == set(CATCH)  # (NoLoops is no mutant)


@pytest.mark.parametrize("mutant", sorted(CATCH))
def test_quick_profile_catches_mutant(mutant: str, tmp_path: Path) -> None:
    areas, expected = CATCH[mutant]
    caught_by = {expected} if isinstance(expected, str) else expected
    isolate = ["--isolate", "yes", "--timeout", "3"] if caught_by & {"crash", "timeout"} else ["--isolate", "no"]
    code, records, out = certify(f"tests.mutants:{mutant}", areas, tmp_path, *isolate)
    assert code == 1, out[-3000:]
    bad = [r for r in records if r["status"] in ("fail", "error", "crash", "timeout")]
    assert bad, out[-3000:]
    kinds = Counter(r["oracle"] if r["status"] == "fail" else r["status"] for r in bad)
    assert caught_by & set(kinds), kinds
    # every failure is saved as a case file with its replay command
    assert all(Path(str(r["case_file"])).exists() and "gradcert replay" in str(r["replay"]) for r in bad)


def test_failure_report_is_the_shrunk_case_not_a_traceback(tmp_path: Path) -> None:
    """pytest prints a failing area test as gradcert's report (verdict, the shrunk case, its replay
    command) and hypothesis's notes: no traceback through gradcert, hypothesis and pytest."""
    code, records, out = certify("tests.mutants:DropFanout", "fanout", tmp_path, "--isolate", "no", "--shrink")
    assert code == 1, out[-3000:]
    failures = out.split("= FAILURES =")[1].split("short test summary")[0].split("warnings summary")[0]
    # each failing test reports a shrunk case (of at most 2 ops) it met, with its replay command
    tests = {str(r["test_id"]) for r in records if r["status"] == "fail"}
    for t in tests:
        block = failures.split(f" {t.split('::')[1]} _")[1].split("\n____")[0]
        said = [r for r in records if r["test_id"] == t and str(r["case"]).split("---")[0] in block]
        assert said and said[0]["size"] <= 2 and f"replay: {said[0]['replay']}" in block, block
    assert "fail (invariants): dead backward op" in failures and "program(%x0" in failures
    assert "raise CaseFailed" not in failures and "areas.py" not in failures, failures  # no gradcert frames
    blocks = [b for b in re.split(r"\n_{3,} \S+ _{3,}\n", failures)[1:]]
    assert blocks and all(b.lstrip().startswith("fail (invariants): ") for b in blocks), failures
    # said once, with the line of the dead op
    assert all(b.count("has no use") == 1 and "line " in b.splitlines()[0] for b in blocks), failures
