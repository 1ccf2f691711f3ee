"""`gradcert fuzz --engine ray` on a real local Ray cluster, with a real Redis example database
(Debian's redis-server, started here on a free port and stopped after)."""

from __future__ import annotations

import collections
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gradcert.conformance.judging import redraw
from gradcert.conformance.outcomes import load
from gradcert.generators.case import parse_case

from ..conftest import ENV, records, run_cli
from ..mutants import kills


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("the cluster tests need Debian's redis-server: apt-get install redis-server (.ci/run does)")
    port = free_port()
    folder = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(10)


def fuzz(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("fuzz", "--engine", "ray", "--results", str(tmp / "r.jsonl"), *args, cwd=tmp, env=env)


def cases(recs: list[Any]) -> list[Any]:
    return [r for r in recs if r.get("case_id")]


def assert_each_case_once_and_every_shard_done(recs: list[Any]) -> None:
    keys = collections.Counter((r["test_id"], r.get("draw") or r["case_id"]) for r in cases(recs))
    assert keys and max(keys.values()) == 1, [k for k, n in keys.items() if n > 1][:3]
    (start,) = [r for r in recs if r.get("run") == "start"]
    plan = start["plan"]
    done = collections.Counter(r["shard_done"] for r in recs if "shard_done" in r)
    assert set(done) == {f"{t}#{r}" for r in range(plan["rounds"]) for t in plan["tests"]}
    assert max(done.values()) == 1  # (no shard run twice)


def test_fuzz_on_a_local_ray_cluster_with_a_redis_database(tmp_path: Path, redis_url: str) -> None:
    r = fuzz(tmp_path, "--backend", "reference", "--workers", "2", "--minutes", "1", "--db", redis_url)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    recs = records(tmp_path / "r.jsonl")
    judged = cases(recs)
    assert len(judged) > 1000 and all(c["status"] == "pass" for c in judged)
    assert len({c["worker"] for c in judged}) >= 2  # host:pid of the Ray worker that judged it
    assert_each_case_once_and_every_shard_done(recs)
    assert "from 2 worker process(es)" in r.stdout


def test_a_planted_defect_met_on_two_workers_is_one_defect_and_its_examples_go_to_redis(
    tmp_path: Path, redis_url: str
) -> None:
    import redis

    db = redis_url[:-1] + "1"  # (a database of its own)
    args = ("--backend", "tests.mutants:WrongSinRule", "--workers", "2", "--areas", "elementwise", "--db", db)
    args += ("--findings", str(tmp_path / "findings"))  # (the index of earlier nights' defects)
    r = fuzz(tmp_path, *args, "--minutes", "0.3", "--shrink-seconds", "5")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    recs = records(tmp_path / "r.jsonl")
    workers: dict[str, set[str]] = collections.defaultdict(set)
    for c in load(recs).cases:  # (each case's signature as its defect's shrink settled it)
        if c["status"] == "fail":
            workers[c["signature"]].add(c["worker"])
    defects = {d["defect"] for d in recs if "defect" in d}
    shown = [line for line in r.stdout.splitlines() if line.startswith("NEW ")]
    assert defects == set(workers) and len(shown) == len(defects), r.stdout[-3000:]
    assert any(len(w) >= 2 for w in workers.values())  # met on two workers, reported once
    for d in (d for d in recs if "defect" in d):
        assert Path(d["case_file"]).is_file() and d["replay"].endswith("--backend tests.mutants:WrongSinRule")
    assert redis.Redis.from_url(db).dbsize() > 0  # hypothesis's examples, shared by every worker
    # the next night, in another results file, replays them before drawing anything new
    (tmp_path / "next").mkdir()
    again = fuzz(tmp_path / "next", *args, "--minutes", "0.1", "--shrink-seconds", "1")
    assert again.returncode == 0, again.stdout[-3000:]  # (found on the first night: not new)
    replayed = [c for c in cases(records(tmp_path / "next" / "r.jsonl")) if "draw" not in c]
    assert any(c["status"] == "fail" for c in replayed)


def test_a_worker_killed_mid_shard_loses_nothing_and_counts_nothing_twice(tmp_path: Path) -> None:
    marker = tmp_path / "killed.case"
    env = dict(ENV, GRADCERT_TEST_MARKER=str(marker))
    args = ("--backend", "tests.mutants:KillsItsWorkerOnce", "--isolate", "no", "--areas", "elementwise")
    # (a budget that leaves a loaded machine time to start a Ray worker again after the death and
    # re-run the shard from the case it died on)
    r = fuzz(tmp_path, *args, "--workers", "2", "--minutes", "0.5", "--db", str(tmp_path / "db"), env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert marker.exists()  # a worker died
    recs = records(tmp_path / "r.jsonl")
    assert not [c for c in cases(recs) if c["status"] != "pass"]  # the shard went on elsewhere, no crash
    assert_each_case_once_and_every_shard_done(recs)
    # the case it died on was judged again, in another worker, and recorded once
    killed = marker.read_text()
    again = [c for c in cases(recs) if redraw(c["test_id"], c["draw"]).to_text() == killed]
    assert len(again) == 1 and again[0]["status"] == "pass"


def test_a_case_that_kills_every_worker_is_a_crash(tmp_path: Path) -> None:
    args = ("--backend", "tests.mutants:KillsEveryWorker", "--isolate", "no", "--areas", "matmul")
    # (a budget in which a loaded machine, starting Ray workers again after each death, still
    # reaches a case that kills)
    r = fuzz(tmp_path, *args, "--workers", "2", "--minutes", "0.5", "--db", str(tmp_path / "db"))
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    recs = records(tmp_path / "r.jsonl")
    crashes = [c for c in cases(recs) if c["status"] == "crash"]
    assert crashes and all(kills(parse_case(c["case"])) for c in crashes)
    assert "killed two Ray workers" in crashes[0]["message"]
    assert all(c["status"] == "pass" for c in cases(recs) if c["status"] != "crash")
    assert_each_case_once_and_every_shard_done(recs)
    (defect,) = [d for d in recs if "defect" in d]
    assert defect["defect"] == "unlocalized in matmul (backend) | crash" and defect["cases"] == len(crashes)


def test_the_driver_killed_and_rerun_resumes_without_redoing_shards(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    args = ["--backend", "reference", "--workers", "2", "--areas", "elementwise,fanout,matmul", "--minutes", "0.5"]
    args += ["--db", str(tmp_path / "db")]
    cmd = ["python", "-m", "gradcert.cli", "fuzz", "--engine", "ray", "--results", str(results), *args]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while not any("shard_done" in r for r in records(results)):
        assert proc.poll() is None and time.monotonic() < deadline, "no shard finished"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, and every process it started
    proc.wait()
    first = records(results)
    done_first = {r["shard_done"] for r in first if "shard_done" in r}
    assert not any(r.get("run") == "end" for r in first)
    r = fuzz(tmp_path, *args)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"resuming the night on record: {len(done_first)} of" in r.stdout
    recs = records(results)
    assert_each_case_once_and_every_shard_done(recs)
    assert [r for r in recs if r.get("run") == "end"][-1]["complete"]


@pytest.mark.parametrize(
    "option, says",
    [
        (("--address", "127.0.0.1:1"), "cannot reach the Ray cluster at 127.0.0.1:1"),
        (("--db", "redis://127.0.0.1:1/0"), "cannot reach the example database redis://127.0.0.1:1/0"),
    ],
)
def test_an_unreachable_cluster_or_database_is_one_line_and_exit_2(
    tmp_path: Path, option: tuple[str, str], says: str
) -> None:
    r = fuzz(tmp_path, "--backend", "reference", "--minutes", "0.1", *option)
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("gradcert: error: ") and says in line
    assert not (tmp_path / "r.jsonl").exists()  # nothing ran, nothing written


def test_the_local_engine_takes_a_redis_database_too(tmp_path: Path, redis_url: str) -> None:
    r = run_cli(
        "fuzz",
        "--backend",
        "reference",
        "--areas",
        "elementwise",
        "--minutes",
        "0.1",
        "--db",
        redis_url,
        "--results",
        str(tmp_path / "r.jsonl"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert cases(records(tmp_path / "r.jsonl"))


def _driver(tmp: Path, *args: str) -> subprocess.Popen[str]:
    cmd = ["python", "-m", "gradcert.cli", "fuzz", "--engine", "ray", "--results", str(tmp / "r.jsonl"), *args]
    return subprocess.Popen(cmd, cwd=tmp, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _until(proc: subprocess.Popen[str], results: Path, what: str, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not any(what in r for r in records(results)):
        assert proc.poll() is None, (proc.stdout.read() if proc.stdout else "")[-3000:]
        assert time.monotonic() < deadline, f"no {what} record"
        time.sleep(0.1)


def test_sigterm_while_the_driver_shrinks_is_incomplete_143_and_the_rerun_shrinks_what_was_left(
    tmp_path: Path,
) -> None:
    """A backend wrong on programs of five ops or more (each defect shrunk): SIGTERM in the
    shrinking phase ends the night INCOMPLETE, exit 143, no traceback; the same command again
    resumes it and records every new defect once."""
    results = tmp_path / "r.jsonl"
    args = ["--backend", "tests.mutants:WrongOnBigPrograms", "--isolate", "no", "--workers", "2"]
    args += ["--areas", "elementwise,fanout", "--minutes", "0.2", "--db", str(tmp_path / "db")]
    proc = _driver(tmp_path, *args, "--shrink-seconds", "120")
    _until(proc, tmp_path / "r.jsonl.progress", "shrinking")  # (the live line's notes)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, out[-3000:] + err[-3000:]
    assert "Traceback" not in err and "INCOMPLETE (SIGTERM)" in out, out[-3000:] + err[-3000:]
    first = records(results)
    assert [r for r in first if r.get("run") == "end"][-1]["complete"] is False
    failing = {c["signature"] for c in cases(first) if c["status"] == "fail"}
    assert failing
    again = fuzz(tmp_path, *args, "--shrink-seconds", "10")
    # (1 where a defect the first part of the night had not shrunk is new; 0 where each one left
    # settled into a defect that part reported, and indexed)
    assert again.returncode in (0, 1) and "Traceback" not in again.stderr, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming the night on record" in again.stdout
    recs = records(results)
    assert_each_case_once_and_every_shard_done(recs)
    # each failing signature shrunk once, or the one a shrink settled into (then indexed: not new)
    settled = {s for d in recs if "defect" in d for s in [*d["of"], d["defect"]]}
    assert failing <= settled
    assert collections.Counter(s for d in recs if "defect" in d for s in d["of"]).most_common(1)[0][1] == 1
    assert [r for r in recs if r.get("run") == "end"][-1]["complete"]


def test_sigint_while_shards_run_is_incomplete_130_without_a_traceback(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    args = ["--backend", "reference", "--workers", "2", "--areas", "elementwise,fanout", "--minutes", "0.5"]
    proc = _driver(tmp_path, *args, "--db", str(tmp_path / "db"))
    _until(proc, results, "case_id")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:] + err[-3000:]
    assert "Traceback" not in err and "INCOMPLETE (SIGINT)" in out, out[-3000:] + err[-3000:]
    assert [r for r in records(results) if r.get("run") == "end"][-1]["complete"] is False
