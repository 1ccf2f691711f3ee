"""Overhead of a check over its physical floor, per backend, and where the time goes.

The floor of one check: the backend alone computing one forward plus backward (in this process, no
op listing, no bookkeeping) for each gradient the check asks for (one; three for a linearity check
of the cotangents area: its cotangents, others, their sum), plus the finite-difference oracle's
forward runs on the reference interpreter: the unperturbed run (its trace and held values; the
oracle takes it from the generator's evaluation of the program where a case has one) and the four
perturbed runs (second order: runs of the first-order program, which the oracle builds for them).

gradcert's time, two ways:

- certify: `gradcert certify --workers 1` in a subprocess, as a user runs it: pytest runs the
  area tests, each drawing its cases with the seeded generator (a failure is handed to hypothesis
  to shrink: conformance/judging.py), a backend other than the reference runs isolated in a worker
  process. Time per check: from the first verdict written to the last, over the verdicts in
  between, in each of three runs (`--rounds`). The floor of each verdict's case (parsed from its
  record) is measured between each two runs, in a process of its own; each run's time over the
  floors next to it, and the median of those ratios. Breakdown, from the session's own timings per
  verdict: backend (as the session runs it), oracles (expected gradients included), and the rest:
  drawing, shrinking (hypothesis), pytest and bookkeeping. (A pass is on record by its seeded
  draw, not its text: its case is drawn again here, `judging.redraw`.)
- in process: the same checks without pytest: the seeded search's draws of every certify test in turn,
  drawn and judged as the search does (`judging.draw_and_check`), in this process, each case timed
  both ways, the two sides in turn in blocks of 50 cases (`--block`), the side that goes first
  alternating (`in_process_child` says why in blocks and not case by case).
  Breakdown: generation, backend, reference, oracles, bookkeeping; and the ratio per area.
- in instructions (`--instructions N`, the reference only, needs valgrind): the in-process way's
  work counted by callgrind, each part in a run of its own: a figure the machine's load cannot move
  (these machines' speed moved by half between runs of one command), repeatable to a few percent.

Ratios last (target: <= 1.5 on the reference and paddle backends).

    python bench/overhead.py [--backends reference,paddle] [--profile certify] [--areas A,B] [--rounds 3]
                             [--cases 1200] [--block 50] [--instructions 100]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from gradcert.backends.reference import ReferenceBackend
from gradcert.backends.registry import resolve
from gradcert.conformance.areas import AREAS
from gradcert.conformance.judging import draw, draw_and_check, recorded_text
from gradcert.conformance.oracles import _setup, normals
from gradcert.conformance.session import Session
from gradcert.generators import Case, parse_case
from gradcert.generators.choices import Seeded
from gradcert.reference.finite_diff import directional
from scaling import certify_tests, run_certify


def fd_runs(case: Case) -> None:
    """The finite-difference oracle's forward runs alone: the unperturbed run (its trace, the held
    values: made here, where the oracle takes the generator's evaluation of a drawn case) and the
    perturbed ones (order 2: of the first-order program, made here too, where the oracle takes the
    generator's)."""
    s = _setup(replace(case, evaluated=None, first_order=None))
    if not s.free:
        return
    direction: list[np.ndarray | None] = [None] * len(s.inputs)
    for k, v in zip(s.free, normals(0, [case.inputs[case.wrt[k]].shape for k in s.free])):
        direction[case.wrt[k]] = v  # (the oracle's directions, made as it makes them)
    directional(s.program, s.inputs, direction, s.cotangents, s.held)


def floor_backend(name: str) -> Callable[[Case], None]:
    if name == "reference":
        ref = ReferenceBackend(listing=False)
        return lambda case: (ref.run(case), None)[1]
    if name == "paddle":
        from gradcert.backends.paddle import PaddleBackend

        pd = PaddleBackend(listing=False)
        return lambda case: (pd._execute(pd._build(case, with_grad=True)), None)[1]
    backend = resolve(name)
    return lambda case: (backend.run(case), None)[1]


def floor(backend: Callable[[Case], None], case: Case, check: str) -> float:
    """Seconds of one check's floor: each gradient the check asks the backend for, and the finite
    differences' interpreter runs. A bad request's is the backend refusing it; a linearity check
    asks for three gradients (`Session._linearity`: its cotangents, others, and their sum)."""
    t = time.perf_counter()
    requests = [case]
    if check == "bad_request":
        requests = [replace(case, cotangents=[np.zeros((*u.shape, 2)) for u in case.cotangents or []])]
    elif check == "linearity" and case.cotangents is not None:
        other = [np.ones_like(u) for u in case.cotangents]
        both = [u + v for u, v in zip(case.cotangents, other)]
        requests += [replace(case, cotangents=other), replace(case, cotangents=both)]
    for r in requests:
        try:
            backend(r)
        except Exception:
            pass  # the backend raised: its time until then is its floor
    if check != "bad_request":
        fd_runs(case)
    return time.perf_counter() - t


def resumable(name: str, mode: str, n: int, *args: str) -> dict[int, Any]:
    """Rows `row K JSON` for K in 0..n-1, measured by a child process (`--child MODE`), in process
    there: a case may crash a backend's native code (Paddle, now and then, not repeatably); the
    child is then started again past that case (the last it said `at K` of), which is left out,
    with the rest of its block for a child that reports a block at a time."""
    rows: dict[int, Any] = {}
    start = 0
    while start < n:
        cmd = [sys.executable, __file__, "--backends", name, "--child", mode, "--start", str(start), *args]
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        begun = start  # (a child that died warming up: past its first case)
        for line in out.splitlines():
            if line.startswith("row "):
                _, k, value = line.split(" ", 2)
                rows[int(k)] = json.loads(value)
            elif line.startswith("at "):
                begun = max(begun, int(line[3:]))
        start = begun + 1
    return rows


def floors_child(name: str, path: str, start: int) -> None:
    """Prints `row K FLOOR` for each recorded case from `start` on."""
    cases = [(parse_case(text), AREAS[area].check) for text, area in json.loads(Path(path).read_text())]
    backend = floor_backend(name)
    gc.freeze()  # (thousands of cases held: the collector would walk them all, again and again)
    for case, check in cases[start : start + 20]:  # warm-up: first calls of kernels and of the framework
        floor(backend, case, check)
    for k in range(start, len(cases)):
        print(f"at {k}", flush=True)
        print(f"row {k} {floor(backend, *cases[k])!r}", flush=True)


def count_child(name: str, what: str, n: int) -> None:
    """The in-process way's work, untimed, for `instructions`: 20 warm-up checks with their floors,
    then checks 0..n-1 one part at a time: `gen` (drawing the case), `check` (drawing it and
    judging it, as the search does) or `floor` (drawing it and its floor)."""
    chosen = certify_tests(name)
    with tempfile.TemporaryDirectory() as d:
        s = Session(name, Path(d) / "r.jsonl", Path(d) / "f", isolate=False)
        gc.freeze()
        backend = floor_backend(name)
        for k in [*range(10**6, 10**6 + 20), *range(n)]:
            test_id, area, features = chosen[k % len(chosen)]
            if what == "gen":
                draw(Seeded(k), features, area.order, area.name)
            if what == "check" or k >= 10**6:
                draw_and_check(s, test_id, area, features, 1, k)
            if what == "floor" or k >= 10**6:
                floor(backend, draw(Seeded(k), features, area.order, area.name), area.check)
        s.close()


def instructions(name: str, n: int) -> float | None:
    """The in-process way's ratio in instructions, counted by valgrind (callgrind) and not in
    seconds: what the machine's load cannot move. Each part runs alone (`count_child`), less a run
    of the warm-up alone. Repeatable to a few percent (set and dict orders follow addresses)."""
    if shutil.which("valgrind") is None:
        print("instructions: needs valgrind (apt-get install valgrind)")
        return None
    runs = [("gen", 0), ("gen", n), ("check", n), ("floor", n)]  # (what, checks): run side by side
    env = dict(os.environ, PYTHONHASHSEED="0")
    procs = {
        key: subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__]
            + ["--backends", name, "--child", "count", "--what", key[0], "--cases", str(key[1])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for key in runs
    }
    count = {}
    for key, proc in procs.items():
        found = re.search(r"Collected : (\d+)", proc.communicate()[1])
        if found is None:
            print(f"instructions: the {key[0]} run failed")
            return None
        count[key] = int(found.group(1))
    base = count["gen", 0]
    gen, total, floor_and_gen = ((count[w, n] - base) / n for w in ("gen", "check", "floor"))
    fl = floor_and_gen - gen
    print(
        f"{name}, certify's checks in process, in instructions: {n} checks, {total / 1e6:.2f} M/check "
        f"(generation {gen / 1e6:.2f} M), floor {fl / 1e6:.2f} M"
    )
    return total / fl


def in_process_child(name: str, start: int, n: int, block: int) -> None:
    """Prints `row K {the session's timings, generation, total, floor}` for checks start..n-1, after
    a warm-up block (first calls of kernels). Check K is certify's: the seeded search's draw K of
    the certify tests in turn (those the backend's capabilities allow), drawn and judged as the
    search does (`judging.draw_and_check`, the collector paused for the case and run at its end).

    The two sides run in blocks of `block` cases, each side in a loop of its own for the block, as
    each runs for real (certify judges case after case; a loop of the backend alone computes floor
    after floor), the side that goes first alternating from block to block, so that the machine's
    drift meets both alike. Case by case (`block` 1) each side ran right after the other, and that
    was not neutral: the check's collection at its case's end also collected the floor's cyclic
    garbage left in the young generation (510 objects a check after a floor, 328 in a loop of
    checks: `gc.callbacks`), and the check's own code (generator, verifier, invariants, results
    line) was cold after a floor, where the floor's code, all of it the check's too, was warm after
    a check. Case by case the reference's ratio came out 1.54 and 1.55, in blocks of 50 1.48 and
    1.42, of 300 1.47 and 1.31 (1,200 checks, alternated in one run); later runs in blocks of 50
    gave 1.44 to 1.52, as much as the machine's drift moves a run. The floor's cases are drawn
    (untimed) at the block's start and frozen for the collector, as the certify way's floors are
    parsed and frozen (`floors_child`); the floor's collector runs as Python sets it."""
    chosen = certify_tests(name)
    with tempfile.TemporaryDirectory() as d:
        s = Session(name, Path(d) / "r.jsonl", Path(d) / "f", isolate=False)
        gc.freeze()  # as the plugin does once a worker's session is up
        backend = floor_backend(name)
        warm = range(10**6 + start, 10**6 + start + 20)
        blocks = [warm, *(range(k, min(k + block, n)) for k in range(start, n, block))]
        for b, ks in enumerate(blocks):
            cases = [(k, *chosen[k % len(chosen)]) for k in ks]
            drawn = [draw(Seeded(k), features, area.order, area.name) for k, _, area, features in cases]
            gc.freeze()  # (the floor's cases: not the collector's work in a loop of the backend alone)
            floors = [0.0] * len(cases)
            rows: list[dict[str, Any] | None] = [None] * len(cases)

            def floor_side() -> None:
                for i, ((k, _, area, _), case) in enumerate(zip(cases, drawn)):
                    if b:  # (not in the warm-up)
                        print(f"at {k}", flush=True)
                    floors[i] = floor(backend, case, area.check)

            def check_side() -> None:
                for i, (k, test_id, area, features) in enumerate(cases):
                    if b:
                        print(f"at {k}", flush=True)
                    judged = len(s.done)
                    t0 = time.perf_counter()
                    draw_and_check(s, test_id, area, features, 1, k)  # a failing case (a Paddle finding) counts too
                    total = time.perf_counter() - t0
                    if len(s.done) > judged:  # (a case drawn twice is judged once)
                        rows[i] = {"area": area.name, **s.last["timings"], "total": total}

            for side in (floor_side, check_side) if b % 2 else (check_side, floor_side):
                side()
            for (k, *_), row, f in zip(cases, rows, floors):
                if b and row is not None:
                    print(f"row {k} {json.dumps({**row, 'floor': f})}", flush=True)
        s.close()


def breakdown(timings: list[dict[str, float]], total: float, rest: str) -> dict[str, float]:
    """Where the time goes, from the session's timings of each check: the backend's own phases
    (as it reports them), the rest of its time, the expected gradients, the oracles; `rest` names
    what is left of `total`."""
    sums: dict[str, float] = defaultdict(float)
    for t in timings:
        for k, v in t.items():
            sums[k] += v
    parts = {k: sums[k] for k in ("generation",) if k in sums}
    phases = sorted(k for k in sums if k.startswith("backend."))
    parts.update({f"backend: {k[8:]}": sums[k] for k in phases})
    parts["backend: the rest" if phases else "backend"] = sums["backend"] - sum(sums[k] for k in phases)
    parts.update({k: sums[k] for k in ("reference", "oracles") if sums.get(k)})
    parts[rest] = total - sum(parts.values())
    return parts


def certify_path(name: str, profile: str, areas: str, rounds: int = 3) -> float:
    """Certify `rounds` times, the floors of its checks between each two: each run's time per
    check over the floors measured next to it (the mean of the two floor runs around it, for a
    run between two), and the median of those ratios (the machine's speed drifts over a minute:
    each ratio compares times taken side by side). The same seeded cases every run."""
    spans, floors = [], []
    with tempfile.TemporaryDirectory() as d:
        wall, records = run_certify(name, profile, areas, 1, Path(d) / "first")
        judged = sorted((r for r in records if r.get("case_id")), key=lambda r: r["time"])
        spans.append(judged[-1]["time"] - judged[0]["time"])
        n = len(judged) - 1  # the checks between the first verdict and the last
        # a case that crashed or hung the backend in certify is left out: its floor counts as the
        # others' mean
        runnable = [r for r in judged[1:] if r["status"] not in ("crash", "timeout")]
        path = Path(d) / "cases.json"
        caps = resolve(name).capabilities  # a pass is on record by its draw: drawn again here
        texts = [recorded_text(r, caps) for r in runnable]
        path.write_text(json.dumps([[text, r["area"]] for text, r in zip(texts, runnable)]))
        for k in range(1, rounds):
            measured = list(resumable(name, "floors", len(runnable), "--cases-file", str(path)).values())
            floors.append(n * sum(measured) / len(measured))
            _, again = run_certify(name, profile, areas, 1, Path(d) / f"again{k}")
            stamps = sorted(r["time"] for r in again if r.get("case_id"))
            spans.append((stamps[-1] - stamps[0]) * n / (len(stamps) - 1))
    around = [floors[0], *((a + b) / 2 for a, b in zip(floors, floors[1:])), floors[-1]]
    ratios = sorted(s / f for s, f in zip(spans, around))
    span, floor = sum(spans) / len(spans), sum(floors) / len(floors)
    # where the first run's time went, in shares of the mean
    parts = breakdown([r["timings"] for r in judged[1:]], spans[0], "shrinking, pytest, bookkeeping")
    parts = {k: v * span / spans[0] for k, v in parts.items()}
    title = f"{name}, certify --profile {profile} --workers 1 ({len(judged)} verdicts, {wall:.0f} s wall)"
    print(
        f"{name}, certify: runs {', '.join(f'{1e3 * s / n:.2f}' for s in spans)} ms/check, floors between them "
        f"{', '.join(f'{1e3 * f / n:.2f}' for f in floors)} ms/check; each run over the floors next to it: "
        f"{', '.join(f'{s / f:.2f}' for s, f in zip(spans, around))}"
    )
    show(title, span, n, floor, parts)
    return ratios[len(ratios) // 2]


def in_process(name: str, n: int, block: int) -> float:
    rows = list(resumable(name, "in_process", n, "--cases", str(n), "--block", str(block)).values())
    per_area: dict[str, list[float]] = {}  # area: [total, floor]
    for r in rows:
        sums = per_area.setdefault(r.pop("area"), [0.0, 0.0])
        sums[0] += r["total"]
        sums[1] += r["floor"]
    total, floors = sum(r.pop("total") for r in rows), sum(r.pop("floor") for r in rows)
    parts = breakdown(rows, total, "bookkeeping and the collector")
    ratio = show(f"{name}, certify's checks in process, without pytest", total, len(rows), floors, parts)
    print("  per area, total / floor: " + ", ".join(f"{a} {t / f:.2f}" for a, (t, f) in per_area.items()))
    return ratio


def show(title: str, total: float, n: int, floor: float, parts: dict[str, float]) -> float:
    """Print one way's figures and breakdown; returns total / floor."""
    print(f"{title}: {n} checks, {1e3 * total / n:.2f} ms/check, floor {1e3 * floor / n:.2f} ms")
    shown = [f"{k} {100 * v / total:.0f}%" for k, v in parts.items() if v >= 0.005 * total]
    print("  where the time goes: " + ", ".join(shown))
    return total / floor


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="reference,paddle")
    ap.add_argument("--profile", default="certify", help="certify's profile (cases per test)")
    ap.add_argument("--areas", default="", help="certify's areas (default: all)")
    ap.add_argument("--cases", type=int, default=1200, help="checks in process")
    ap.add_argument("--block", type=int, default=50, help="checks in process: cases per side in turn")
    ap.add_argument("--rounds", type=int, default=3, help="certify runs (floors measured between each two)")
    ap.add_argument(
        "--instructions",
        type=int,
        default=0,
        metavar="N",
        help="on the reference, also count the instructions of N in-process checks and floors (valgrind; ~1 min a 100)",
    )
    ap.add_argument("--child", choices=("floors", "in_process", "count"), help=argparse.SUPPRESS)  # see `resumable`
    ap.add_argument("--what", choices=("gen", "check", "floor"), help=argparse.SUPPRESS)
    ap.add_argument("--cases-file", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds: at least 2 (the floors are measured between certify runs)")
    if args.block < 1:
        ap.error("--block: at least 1")
    if args.child:
        if args.child == "floors":
            floors_child(args.backends, args.cases_file, args.start)
        elif args.child == "count":
            count_child(args.backends, args.what, args.cases)
        else:
            in_process_child(args.backends, args.start, args.cases, args.block)
        sys.stdout.flush()
        os._exit(0)
    ratios = {}
    for name in args.backends.split(","):
        ratios[name, "certify"] = certify_path(name, args.profile, args.areas, args.rounds)
        ratios[name, "in process"] = in_process(name, args.cases, args.block)
        if args.instructions and name == "reference":  # (a framework under valgrind: many minutes)
            counted = instructions(name, args.instructions)
            if counted is not None:
                ratios[name, "in process, in instructions"] = counted
    for (name, way), r in ratios.items():
        print(f"ratio total / floor per check, {name}, {way}: {r:.2f} (target <= 1.5)")
    sys.stdout.flush()
    os._exit(0)  # Paddle's native code can abort at interpreter exit, after the results


if __name__ == "__main__":
    main()
