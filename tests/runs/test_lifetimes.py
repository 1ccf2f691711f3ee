"""A run's processes die with it: `certify` killed by SIGKILL leaves no process writing its
results file, and the results lock lives exactly as long as a writer does (real processes, real
signals)."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gradcert.conformance import lifeline

from ..conftest import ENV, records

AREAS = "elementwise,fanout,if,while,nesting,combine_split,reductions_shape,stop_gradient"


def children() -> dict[int, list[int]]:
    """Every live process's children, by pid (/proc)."""
    tree: dict[int, list[int]] = collections.defaultdict(list)
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree[ppid].append(int(d.name))
    return tree


def descendants(pid: int) -> set[int]:
    tree, out, todo = children(), set(), [pid]
    while todo:
        for c in tree.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # (a zombie writes nothing)


def certify(tmp: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "gradcert.cli", "certify", "--backend", "reference", "--profile", "certify"]
    cmd += ["--areas", AREAS, "--workers", "2", "--isolate", "yes", "--results", str(tmp / "r.jsonl")]
    cmd += ["--report", str(tmp / "r.html"), "--findings", str(tmp / "findings")]
    return subprocess.Popen(cmd, cwd=tmp, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_certify_killed_by_sigkill_leaves_no_writer_and_a_rerun_judges_every_case_once(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    proc = certify(tmp_path)
    deadline = time.monotonic() + 300
    while (not results.exists() or len(results.read_bytes().splitlines()) < 600) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:] if proc.stdout else ""
        time.sleep(0.2)
    family = descendants(proc.pid)
    # the child pytest, its two xdist workers and their backend worker processes
    assert len(family) >= 5, family
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gone_by = time.monotonic() + 5
    while any(alive(p) for p in family) and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert not [p for p in family if alive(p)], "processes of the killed run live on"
    size = results.stat().st_size
    time.sleep(3)
    assert results.stat().st_size == size, "something still appends to the results file"
    # the lock went with the last writer: a rerun is accepted, resumes, and judges each case once
    again = certify(tmp_path)
    out, _ = again.communicate(timeout=900)
    assert again.returncode == 0, out.decode()[-3000:]
    assert "PASSED" in out.decode()
    cases = [r for r in records(results) if r.get("case_id")]
    keys = collections.Counter((r["test_id"], r.get("draw") or r["case_id"]) for r in cases)
    assert [k for k, n in keys.items() if n > 1] == []
    ends = [r for r in records(results) if r.get("run") == "end"]
    assert ends[-1]["complete"] and ends[-1]["judged"] == ends[-1]["planned"] == len(keys)


def test_the_lock_lasts_while_any_writer_lives(tmp_path: Path) -> None:
    """A starter lets go, a writer that holds the lock shared still refuses a rerun; once the
    writer dies (SIGKILL), the rerun is accepted."""
    results = tmp_path / "r.jsonl"
    fd = lifeline.start(results)
    code = (
        "import sys, time; from gradcert.conformance import lifeline; "
        "lifeline.share(sys.argv[1]); print('held', flush=True); time.sleep(600)"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", code, str(lifeline.lock_path(results))], env=ENV, stdout=subprocess.PIPE
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"held\n"
        lifeline.release(fd)  # (the starter dies)
        try:
            lifeline.start(results)
        except lifeline.Held as e:
            assert e.pid == str(os.getpid())
        else:
            raise AssertionError("a rerun was accepted while a writer lives")
    finally:
        writer.kill()
        writer.wait()
    lifeline.release(lifeline.start(results))


def test_a_child_dies_with_its_parent_killed_by_sigkill(tmp_path: Path) -> None:
    """A process started with `lifeline.preexec`, and one that calls `die_with_parent` itself (as
    an xdist worker does), both die when their parent is killed."""
    parent_code = (
        "import subprocess, sys, time; from gradcert.conformance import lifeline; "
        "a = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
        "preexec_fn=lifeline.preexec()); "
        "b = subprocess.Popen([sys.executable, '-c', "
        "'import time; from gradcert.conformance import lifeline; lifeline.die_with_parent(); "
        "print(1, flush=True); time.sleep(600)'], stdout=subprocess.PIPE, close_fds=True); "
        "b.stdout.readline(); print(a.pid, b.pid, flush=True); time.sleep(600)"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=ENV, stdout=subprocess.PIPE)
    assert parent.stdout is not None
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2 and all(alive(p) for p in pids)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)]
