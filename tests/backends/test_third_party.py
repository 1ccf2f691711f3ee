"""The third-party backend kit: `examples/third_party_backend/` installed as a package and
certified through its entry point, as its users would install and certify it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import INHERITED_PATH, ROOT, certify, run_cli

KIT = ROOT / "examples" / "third_party_backend"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The example installed by pip into a folder of its own (its dist-info holds the entry
    point), and an environment that imports from that folder."""
    target = tmp_path_factory.mktemp("site")
    source = shutil.copytree(KIT, tmp_path_factory.mktemp("kit") / KIT.name)  # (pip builds in the source folder)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, "--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    assert (target / "gradcert_tape_example-0.1.0.dist-info" / "entry_points.txt").is_file()
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(target), INHERITED_PATH])))


def test_the_example_backend_is_certified_through_its_entry_point(installed: dict[str, str], tmp_path: Path) -> None:
    r, recs = certify("tape", tmp_path, profile="quick", workers="2", env=installed)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASSED" in r.stdout
    cases = [x for x in recs if "status" in x]
    judged = {x["area"] for x in cases if x["status"] == "pass"}
    # what a straight-line backend can be asked is judged; what needs a capability it lacks is not
    assert {"elementwise", "reductions_shape", "matmul", "fanout", "stop_gradient", "no_grad", "bad_requests"} <= judged
    assert {x["area"] for x in cases if x["status"] == "unsupported"} >= {"if", "while", "inplace", "second_order"}
    assert {x["backend"] for x in cases} == {"tape"}
    assert all(x["status"] in ("pass", "unsupported") for x in cases)


def test_the_entry_point_is_listed_and_a_wrong_name_says_what_exists(installed: dict[str, str], tmp_path: Path) -> None:
    r = run_cli("check", str(ROOT / "examples" / "fanout.gc"), "--backend", "tapes", cwd=tmp_path, env=installed)
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "unknown backend 'tapes'" in line and "tape," in line
    ok = run_cli("check", str(ROOT / "examples" / "fanout.gc"), "--backend", "tape", cwd=tmp_path, env=installed)
    assert ok.returncode == 0, ok.stdout + ok.stderr
