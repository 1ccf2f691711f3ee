from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.gc"))


@pytest.fixture(params=EXAMPLES, ids=lambda p: p.stem)
def example(request: pytest.FixtureRequest) -> Path:
    return request.param  # type: ignore[no-any-return]


# what PYTHONPATH the tests were given: it goes on to every process they start, so that a source
# tree named there wins over an installed gradcert in child processes as in this one
INHERITED_PATH = os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
# so that worker processes import tests.mutants
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), INHERITED_PATH])))


def env_without_tests() -> dict[str, str]:
    """ENV without the repository root on PYTHONPATH (what a user's own folder sees)."""
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    if INHERITED_PATH:
        env["PYTHONPATH"] = INHERITED_PATH
    return env


def run_cli(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`gradcert ARGS...` as a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "gradcert.cli", *args],
        cwd=cwd,
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def certify(
    backend: str,
    tmp_path: Path,
    profile: str = "quick",
    workers: str = "1",
    extra: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    """`gradcert certify --backend BACKEND [EXTRA...]` into `tmp_path` (results `r.jsonl`, report
    `r.html`, findings `findings/`), run there: the run and its records (a line being written, or
    a file not JSON lines on purpose, left out)."""
    results = tmp_path / "r.jsonl"
    r = run_cli(
        "certify",
        "--backend",
        backend,
        "--profile",
        profile,
        "--results",
        str(results),
        "--report",
        str(tmp_path / "r.html"),
        "--findings",
        str(tmp_path / "findings"),
        "--workers",
        workers,
        *extra,
        cwd=tmp_path,
        env=env,
        timeout=1800,
    )
    return r, records(results)


def records(path: Path) -> list[Any]:
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out
