"""A worker process: runs one backend on case after case (one JSON line in, one out), so that a
backend's native crash or hang costs that case alone. `python -m gradcert.conformance.worker SPEC`."""

from __future__ import annotations

import gc
import json
import sys
import traceback

from ..generators.case import parse_case
from .api import Unsupported
from .backends import resolve
from .wire import result_to_json


def main() -> None:
    backend = resolve(sys.argv[1])
    gc.freeze()  # the framework's import lives as long as the worker: out of the collector's scans
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever the backend prints must not corrupt the protocol
    out.write(json.dumps({"ready": backend.version}) + "\n")
    out.flush()
    for line in sys.stdin:
        reply: dict[str, object]
        try:
            case = parse_case(json.loads(line)["case"])
            reply = {"ok": result_to_json(backend.run(case))}
        except Unsupported as e:
            reply = {"unsupported": str(e)}
        except Exception as e:  # the backend raised: an `error` verdict (or the expected bad-request error)
            reply = {
                "error": {
                    "type": type(e).__name__,
                    "message": str(e)[:2000],
                    "traceback": traceback.format_exc()[-4000:],
                }
            }
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
