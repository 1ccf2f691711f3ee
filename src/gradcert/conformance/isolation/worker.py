"""A worker process: runs one backend on case after case (one JSON line in, one out), so that a
backend's native crash or hang costs that case alone. `python -m gradcert.conformance.isolation.worker SPEC
[DEVICE]`."""

from __future__ import annotations

import gc
import json
import sys
import traceback

from gradcert.backends.protocol import AdapterLimit, Backend, Unsupported
from gradcert.backends.registry import resolve
from gradcert.conformance import lifeline
from gradcert.conformance.isolation.wire import result_to_json
from gradcert.generators.case import parse_case
from gradcert.reference import collector


def main() -> None:
    lifeline.die_with_parent()  # (never an orphan: the process that runs the cases is its parent)
    backend = resolve(sys.argv[1], *sys.argv[2:3])
    gc.freeze()  # what is loaded lives as long as the worker: out of the collector's scans
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever the backend prints must not corrupt the protocol
    out.write(json.dumps({"ready": backend.version}) + "\n")
    out.flush()
    first = True
    for line in sys.stdin:
        # a case at a time for the collector, as the search draws and judges one
        # (`judging.draw_and_check`): the parsed program's cycles are freed young at its end
        with collector.paused(collect_young=True):
            reply = _reply(backend, line)
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if first:
            # a framework is imported at its first case (`resolve` does not import it): its
            # modules out of the collector's scans too (a full scan walks all of Paddle's objects,
            # and each case's programs would trigger one)
            gc.collect()
            gc.freeze()
            first = False


def _reply(backend: Backend, line: str) -> dict[str, object]:
    try:
        case = parse_case(json.loads(line)["case"])
        return {"ok": result_to_json(backend.run(case))}
    except AdapterLimit as e:
        return {"limit": str(e)}
    except Unsupported as e:
        return {"unsupported": str(e)}
    except Exception as e:  # the backend raised: an `error` verdict (or the expected bad-request error)
        return {
            "error": {
                "type": type(e).__name__,
                "message": str(e)[:2000],
                "traceback": traceback.format_exc()[-4000:],
            }
        }


if __name__ == "__main__":
    main()
