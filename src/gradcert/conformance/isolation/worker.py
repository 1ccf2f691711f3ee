"""A worker process: runs one backend on case after case (one JSON line in, one out), so that a
backend's native crash or hang costs that case alone. `python -m gradcert.conformance.isolation.worker SPEC
[DEVICE]`; or, with `--zygote SPEC DEVICE FD`, a fork server that forks such workers on request
(`zygote`)."""

from __future__ import annotations

import gc
import json
import os
import socket
import sys
import traceback
from typing import IO

from gradcert.backends.protocol import AdapterLimit, Backend, Unsupported
from gradcert.backends.registry import resolve
from gradcert.conformance import lifeline
from gradcert.conformance.isolation.wire import result_to_json
from gradcert.generators.case import parse_case
from gradcert.reference import collector


def main() -> None:
    lifeline.die_with_parent()  # (never an orphan: the process that runs the cases is its parent)
    if sys.argv[1] == "--zygote":
        zygote(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    backend = resolve(sys.argv[1], *sys.argv[2:3])
    gc.freeze()  # what is loaded lives as long as the worker: out of the collector's scans
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever the backend prints must not corrupt the protocol
    serve(backend, sys.stdin, out)


def serve(backend: Backend, inp: IO[str], out: IO[str]) -> None:
    """Say ready, then answer case after case until the input ends."""
    out.write(json.dumps({"ready": backend.version}) + "\n")
    out.flush()
    first = True
    for line in inp:
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


def zygote(spec: str, device: str, control: int) -> None:
    """A fork server: gradcert and the backend's module loaded (never its framework, which a
    worker imports at its first case: a framework's threads do not survive a fork), it forks a
    worker on each request on socket `control` — the request carrying the worker's stdin, stdout
    and stderr — in a few milliseconds, where a worker started from nothing takes Python's,
    NumPy's and gradcert's imports (a crash's cost: `bench/crashes.py`). Requests: b"fork" with
    three fds (replied with the pid), b"wait PID" and b"poll PID" (replied with the exit status
    as `subprocess` gives it, or "-" where it still runs)."""
    backend = resolve(spec, device)
    gc.freeze()
    sock = socket.socket(fileno=control)
    sock.sendall(b"ready\n")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 3)
        except OSError:
            return
        if not msg:
            return  # (the runner closed: this process ends, its workers see their input end)
        if msg == b"fork":
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    sock.close()
                    _forked(backend, *fds)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            sock.sendall(f"{pid}\n".encode())
            continue
        what, pid_text = msg.decode().split()
        try:
            got, status = os.waitpid(int(pid_text), 0 if what == "wait" else os.WNOHANG)
            reply = "-" if got == 0 else str(os.waitstatus_to_exitcode(status))
        except ChildProcessError:
            reply = "x"  # (not a child, or reaped already)
        sock.sendall(f"{reply}\n".encode())


def _forked(backend: Backend, stdin: int, stdout: int, stderr: int) -> None:
    """A worker forked by the zygote: its parent is the zygote (which dies with the runner)."""
    lifeline.die_with_parent(os.getppid())
    os.dup2(stderr, 2)
    for fd in (stderr,):
        os.close(fd)
    inp = os.fdopen(stdin, "r")
    out = os.fdopen(stdout, "w")
    sys.stdout = sys.stderr  # whatever the backend prints must not corrupt the protocol
    serve(backend, inp, out)


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
