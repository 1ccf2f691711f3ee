"""`gradcert show`, run as a real subprocess: success on every example, one-line errors with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import ENV, EXAMPLES, ROOT, env_without_tests, run_cli

EXAMPLES_DIR = ROOT / "examples"


def test_show_every_example() -> None:
    r = run_cli("show", *map(str, EXAMPLES))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("== ") == len(EXAMPLES)
    assert r.stdout.count("outputs:") == len(EXAMPLES)


BAD = {
    "syntax": ("program(%x: f64[3]) {\n  %y = tanh(%x) f64[3]\n  return %y\n}\n", ":2:17: expected ':'"),
    "undefined": ("program(%x: f64[3]) {\n  %y = tanh(%q) : f64[3]\n  return %y\n}\n", ":2:13: undefined value %q"),
    "type": (
        "program(%x: f64[3]) {\n  %y = sum(%x) {axes=[], keepdim=false} : f64[3]\n  return %y\n}\n",
        ":2:3: type mismatch: 'sum': result type (f64[3]) differs",
    ),
    "inplace": (
        "program(%x: f64[3]) {\n  %a = exp(%x) : f64[3]\n  %b = exp_(%a) : f64[3]\n"
        "  %c = add(%a, %b) : f64[3]\n  return %c\n}\n",
        ":4:3: in-place rule: 'add': %a is used after 'exp_'",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_file_exits_2_with_one_line(kind: str, tmp_path: Path) -> None:
    src, words = BAD[kind]
    f = tmp_path / f"{kind}.gc"
    f.write_text(src)
    r = run_cli("show", str(f))
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert str(f) + words in lines[0]


def test_missing_file(tmp_path: Path) -> None:
    r = run_cli("show", str(tmp_path / "nope.gc"))
    assert r.returncode == 2
    assert r.stderr.strip() == f"gradcert: error: {tmp_path / 'nope.gc'}: no such file"


def test_show_grad_prints_backward_and_fd() -> None:
    r = run_cli("show", "--grad", "examples/while_basic.gc")
    assert r.returncode == 0, r.stderr
    assert "backward program:" in r.stdout and "tuple_pop" in r.stdout and "has_elements" in r.stdout
    errs = [float(line.rsplit(" ", 1)[1]) for line in r.stdout.splitlines() if "max abs err" in line]
    assert len(errs) == 2 and max(errs) < 1e-8


def test_unknown_device_is_usage_error() -> None:
    r = run_cli("show", "--device", "tpu", str(EXAMPLES[0]))
    assert r.returncode == 2


def test_bad_options_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args, said in (
        (["certify", "--workers", "abc"], "'abc' is not a number of workers"),
        (["certify", "--workers", "0"], "'0' is not a number of workers"),
        (["fuzz", "--workers", "-1"], "'-1' is not a number of workers"),
        (["nothing"], "invalid choice: 'nothing'"),
    ):
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and said in r.stderr, (args, r.stderr)
        assert r.stdout == "" and not (tmp_path / "reports").exists()


def test_report_of_a_file_that_is_not_json_lines_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("these are not results\n")
    r = run_cli("report", "notes.txt", "-o", "out.html", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == "gradcert: error: notes.txt:1: not a JSON record: not a results file\n"
    assert not (tmp_path / "out.html").exists()


def test_a_backend_module_in_the_current_folder_is_found_and_findings_land_beside_the_results(
    tmp_path: Path,
) -> None:
    """`--backend mymod:MyBackend` from the module's own folder, as `python -m` would find it: by
    certify, its pytest and the backend's worker processes; a defect's case lands beside the
    results, wherever they are."""
    (tmp_path / "mymod.py").write_text(MYMOD)
    env = env_without_tests()
    out = tmp_path / "elsewhere"
    r = run_cli(
        "certify",
        "--backend",
        "mymod:MyBackend",
        "--profile",
        "quick",
        "--areas",
        "elementwise",
        "--results",
        str(out / "r.jsonl"),
        "--report",
        str(out / "r.html"),
        cwd=tmp_path,
        env=env,
    )
    assert r.returncode == 1 and "NEW mine: every op | wrong value" in r.stdout, r.stdout + r.stderr
    assert list((out / "findings" / "mine").glob("*.case")) and not (tmp_path / "reports").exists()
    # a module that does not import: one line naming the file and line
    (tmp_path / "mymod.py").write_text("def broken(:\n")
    bad = run_cli("certify", "--backend", "mymod:MyBackend", cwd=tmp_path, env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "SyntaxError" in bad.stderr, bad.stderr
    assert "mymod.py:1" in bad.stderr


MYMOD = """
from gradcert.backends.reference import ReferenceBackend


class MyBackend(ReferenceBackend):
    name = "mine"

    def run(self, case):
        r = super().run(case)
        r.grads = [None if g is None else g * 1.5 for g in r.grads]
        return r
"""


SCALED = """
from gradcert.backends.reference import ReferenceBackend


class Scaled(ReferenceBackend):
    name = "scaled"

    def run(self, case):
        r = super().run(case)
        r.grads = [None if g is None else g * 1.0001 for g in r.grads]
        return r
"""


def test_check_judges_ones_own_program_and_prints_a_replay_that_works_where_printed(tmp_path: Path) -> None:
    ok = run_cli("check", str(EXAMPLES_DIR / "while_basic.gc"), "--backend", "reference", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.endswith("1 of 1 passed\n"), ok.stdout + ok.stderr
    (tmp_path / "while_basic.gc").write_text((EXAMPLES_DIR / "while_basic.gc").read_text())
    (tmp_path / "scaled.py").write_text(SCALED)
    env = env_without_tests()
    bad = run_cli("check", "while_basic.gc", "--backend", "scaled:Scaled", cwd=tmp_path, env=env)
    assert bad.returncode == 1 and "while_basic.gc: fail (reference)" in bad.stdout, bad.stdout + bad.stderr
    replay = next(x.split("replay: ", 1)[1] for x in bad.stdout.splitlines() if "replay: " in x)
    assert replay.startswith("gradcert replay ") and replay.endswith(" --backend scaled:Scaled")
    again = run_cli(*replay.split()[1:], cwd=tmp_path, env=env)
    assert again.returncode == 1 and "verdict: fail (reference)" in again.stdout, again.stdout + again.stderr
    # the saved case, judged against the reference: it passes
    case = replay.split()[2]
    assert run_cli("check", case, "--backend", "reference", cwd=tmp_path).returncode == 0
    # several seeds, random cotangents, second order
    many = run_cli("check", "while_basic.gc", "--repeat", "3", "--cotangents", "random", "--order", "2", cwd=tmp_path)
    assert many.returncode == 0 and "3 of 3 passed" in many.stdout, many.stdout + many.stderr


def test_check_of_a_request_that_does_not_fit_is_one_line(tmp_path: Path) -> None:
    program = str(EXAMPLES_DIR / "while_basic.gc")
    for args, said in (
        (["--wrt", "7"], "while_basic.gc: input 7 is out of range (the program has 2 inputs: 0..1)"),
        (["--outputs", "x"], "'x' is not a comma-separated list of positions"),
        (["--inputs", "none.npz"], "none.npz: no such .npz file"),
    ):
        r = run_cli("check", program, *args, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and said in r.stderr, (args, r.stderr)
    # an index: finite differences would perturb it, and no gradient is defined there
    index = str(ROOT / "tests" / "programs" / "index_input.gc")
    for args, said in ((["--wrt", "1"], "input 1 (%i: i64[2]) is not a float tensor"),):
        r = run_cli("check", index, *args, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and said in r.stderr, (args, r.stderr)


def test_check_in_python() -> None:
    import gradcert

    text = (EXAMPLES_DIR / "while_basic.gc").read_text()
    assert gradcert.check(text).status == "pass"
    assert gradcert.check(text, backend="tests.mutants:RelativeError", seed=3).status == "fail"


def test_a_case_whose_position_is_out_of_range_says_which(tmp_path: Path) -> None:
    text = (ROOT / "tests" / "known" / "known-and-new-in-ifs" / "a1b6a3849752.case").read_text()
    program, _, request = text.partition("---")
    (tmp_path / "bad.case").write_text(program + "---" + request.replace('"outputs": [0]', '"outputs": [5]', 1))
    r = run_cli("replay", "bad.case", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == (
        "gradcert: error: bad.case: outputs[0] is 5, but the program has 1 outputs (0..0)\n"
    ), r.stderr


def test_a_run_leaves_no_hypothesis_folder_where_it_was_started(tmp_path: Path) -> None:
    """A defect no derived case shows is shrunk by hypothesis, whose own files go to the user's
    cache folder, not into the current folder."""
    env = dict(ENV, XDG_CACHE_HOME=str(tmp_path / "cache"))
    args = ["--backend", "tests.mutants:WrongOnBigPrograms", "--profile", "quick", "--areas", "elementwise"]
    r = run_cli("certify", *args, "--isolate", "no", "--shrink-seconds", "3", cwd=tmp_path, env=env)
    assert r.returncode == 1 and "NEW wrong-on-big-programs: unlocalized in elementwise" in r.stdout, r.stdout[-2000:]
    assert not (tmp_path / ".hypothesis").exists()
