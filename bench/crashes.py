"""What a crash costs: throughput (cases judged a second) of a backend whose worker process dies
at every case, against the same backend without crashes, both isolated in worker processes as
certify runs them.

- crash-heavy: `tests.mutants:KillsEveryWorker` (the reference backend, its worker SIGKILLed at
  one case in sixteen) and `tests.mutants:KillsEveryCase` (at every case), workers forked by the
  zygote with a warm spare taking over at each death (`isolation/runner.py`), and as before both:
  a worker started from nothing after each death;
- without crashes: `reference`, the same backend without the kill, isolated the same way.

Each side judges `--cases` seeded cases of one certification test through a session
(`judging.draw_and_check`, as the search does: every verdict classified — a failure judged again,
localized — and recorded), after a warm-up. The ratio is printed last (target: >= 0.5).

    python bench/crashes.py [--cases 200] [--crash-cases 8] [--test test_elementwise.py::test_unary]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (tests.mutants)

from gradcert.conformance.areas import spec  # noqa: E402
from gradcert.conformance.isolation.runner import Isolated  # noqa: E402
from gradcert.conformance.judging import draw_and_check  # noqa: E402
from gradcert.conformance.session import Session  # noqa: E402


def throughput(backend: str, test_id: str, cases: int, spare: bool = True) -> tuple[float, dict[str, int]]:
    """Cases judged a second by an isolated session of `backend`, and their statuses; `spare`:
    workers forked by the zygote with a warm spare, else each started from nothing after a death
    (as before either)."""
    area, features, _ = spec(test_id)
    with tempfile.TemporaryDirectory() as d:
        s = Session(backend, Path(d) / "r.jsonl", Path(d) / "findings", "certify", isolate=True, timeout=30)
        if not spare:
            s.runner.close()
            s.runner = Isolated(backend, 30, spare=False, fork=False)
        features = features.narrow(s.capabilities)
        draw_and_check(s, test_id, area, features, 1, 10**9)  # (warm: the first worker started)
        statuses: dict[str, int] = {}
        t = time.perf_counter()
        for k in range(2, cases + 2):
            v = draw_and_check(s, test_id, area, features, k, 10**9 + k)[0]
            statuses[v.status] = statuses.get(v.status, 0) + 1
        took = time.perf_counter() - t
        s.close()
    return cases / took, statuses


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--crash-cases", type=int, default=8, help="cases of the backend that crashes at every one")
    ap.add_argument("--test", default="test_elementwise.py::test_unary")
    a = ap.parse_args()
    clean, ok = throughput("reference", a.test, a.cases)
    print(f"without crashes (reference, isolated): {clean:.1f} cases/s {ok}", flush=True)
    for mutant, what in (("KillsEveryWorker", "one case in sixteen"), ("KillsEveryCase", "every case")):
        rates = {}
        for spare in (True, False):
            n = a.cases if mutant == "KillsEveryWorker" else a.crash_cases
            rates[spare], got = throughput(f"tests.mutants:{mutant}", a.test, n, spare)
            way = "forked, warm spare" if spare else "started from nothing, no spare"
            print(f"{what} a crash, {way}: {rates[spare]:.2f} cases/s {got}", flush=True)
        print(f"ratio crash-heavy ({what}) / without crashes, started from nothing: {rates[False] / clean:.3f}")
        print(f"ratio crash-heavy ({what}) / without crashes: {rates[True] / clean:.3f}")


if __name__ == "__main__":
    main()
