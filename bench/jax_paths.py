"""JAX's certify time on its code paths, side by side on the same draws: `--backend jax` (staged
where a case has control flow, eager where it is straight-line), `jax-eager` (`jax.vjp` eagerly,
primitive by primitive) and `jax-jit` (each request traced whole under `jax.jit`, compiled once).
Prints each run's wall time and verdicts by status -- which must be the same on every path, case
for case, or a faster path certifies less -- and the ratio of each path's time to the first's
(target: `jax` with 2 workers <= 120 s for the certify profile).

    python bench/jax_paths.py [--profile certify] [--areas A,B] [--workers 2] [--paths jax,jax-eager,jax-jit]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path
from typing import Any

from scaling import run_certify


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="certify")
    ap.add_argument("--areas", default="")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--paths", default="jax,jax-eager,jax-jit")
    args = ap.parse_args()
    times, verdicts = {}, {}
    for backend in args.paths.split(","):
        with tempfile.TemporaryDirectory() as d:
            wall, records = run_certify(backend, args.profile, args.areas, args.workers, Path(d))
        statuses = {(r["test_id"], r["case_id"]): r["status"] for r in records if r.get("case_id")}
        # (a failure is compared by its kind: each path has its own known defects)
        cases = {(r["test_id"], r["case_id"]): _verdict(r) for r in records if r.get("case_id")}
        times[backend], verdicts[backend] = wall, cases
        counts = collections.Counter(statuses.values())
        said = ", ".join(f"{n} {status}" for status, n in counts.most_common())
        print(
            f"{backend}, {args.workers} worker(s), {args.profile}: {wall:.1f} s, {len(cases)} verdicts: {said}",
            flush=True,
        )
    first, *others = args.paths.split(",")
    for other in others:
        differ = [
            k
            for k in verdicts[first].keys() | verdicts[other].keys()
            if verdicts[first].get(k) != verdicts[other].get(k)
        ]
        for k in sorted(differ)[:10]:
            print(f"  differs: {k[0]}[{k[1]}]: {first} {verdicts[first].get(k)}, {other} {verdicts[other].get(k)}")
        print(f"verdicts that differ, {first} / {other}: {len(differ)}")
        print(f"ratio certify time {other} / {first}: {times[other] / times[first]:.2f}")
    if any(verdicts[first] != verdicts[o] for o in others):
        sys.exit(1)


def _verdict(r: dict[str, Any]) -> str:
    return (
        r["status"]
        if r["status"] in ("pass", "invalid", "unsupported")
        else f"failing ({r.get('kind') or r['status']})"
    )


if __name__ == "__main__":
    main()
