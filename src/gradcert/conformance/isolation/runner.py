"""Running a backend on a case, in this process or isolated in a worker process with a timeout.

Either way the answer is a `BackendResult`, or an `Outcome` saying why there is none: the backend
lacks the capability (`unsupported`), raised (`error`), died (`crash`) or hung (`timeout`).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO

from gradcert.backends.protocol import AdapterLimit, Backend, BackendResult, Unsupported
from gradcert.conformance import lifeline
from gradcert.conformance.isolation.wire import result_from_json
from gradcert.conformance.verdicts import LIMIT, Status
from gradcert.generators.case import Case


@dataclass
class Outcome:
    status: Status  # unsupported, error, crash, timeout
    message: str
    error_type: str = ""


def _death(status: int | None) -> str:
    """How a process died, from its exit status (a signal is negative)."""
    if status is not None and status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"


class InProcess:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.version = backend.version

    def run(self, case: Case) -> BackendResult | Outcome:
        try:
            return self.backend.run(case)
        except AdapterLimit as e:
            return Outcome(Status.UNSUPPORTED, LIMIT + str(e), "AdapterLimit")
        except Unsupported as e:
            return Outcome(Status.UNSUPPORTED, str(e))
        except Exception as e:
            return Outcome(Status.ERROR, f"{type(e).__name__}: {e}", type(e).__name__)

    def close(self) -> None:
        pass


class _Forked:
    """A worker forked by a `_Zygote`, with the part of `subprocess.Popen`'s interface a runner
    uses (its exit status comes from the zygote, its parent)."""

    def __init__(self, zygote: _Zygote, pid: int, stdin: IO[str], stdout: IO[str]) -> None:
        self.zygote, self.pid, self.stdin, self.stdout = zygote, pid, stdin, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.status(self.pid, block=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class _Zygote:
    """A fork server (`worker.zygote`): forks a worker in milliseconds, where one started from
    nothing imports Python's, NumPy's and gradcert's modules first (a second on a loaded machine)."""

    def __init__(self, spec: str, device: str, log: IO[str]) -> None:
        ours, theirs = socket.socketpair()
        self.sock = ours
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gradcert.conformance.isolation.worker", "--zygote", spec, device]
            + [str(theirs.fileno())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            pass_fds=[theirs.fileno()],
            env=lifeline.watched(dict(os.environ, PYTHONUNBUFFERED="1")),
            preexec_fn=lifeline.preexec(),
        )
        theirs.close()
        self.reader = ours.makefile("r")
        self.ready = False

    def _line(self) -> str:
        line = self.reader.readline()
        if not line:
            raise OSError("the zygote died")
        return line.strip()

    def fork(self, stderr: IO[str]) -> _Forked:
        if not self.ready:
            if self._line() != "ready":
                raise OSError("the zygote did not start")
            self.ready = True
        to_child, child_in = os.pipe()[::-1]  # (child_in: the read end, the worker's stdin)
        child_out, from_child = os.pipe()[::-1]  # (child_out: the write end, its stdout)
        try:
            socket.send_fds(self.sock, [b"fork"], [child_in, child_out, stderr.fileno()])
            pid = int(self._line())
        finally:
            os.close(child_in)
            os.close(child_out)
        return _Forked(self, pid, os.fdopen(to_child, "w"), os.fdopen(from_child, "r"))

    def status(self, pid: int, block: bool) -> int | None:
        self.sock.sendall(f"{'wait' if block else 'poll'} {pid}".encode())
        said = self._line()
        return None if said == "-" else -signal.SIGKILL if said == "x" else int(said)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.sock.close()
        self.reader.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


Worker = subprocess.Popen[str] | _Forked


class Isolated:
    """One persistent worker process, and a warm spare started ahead: a worker that crashes or
    hangs is replaced by the spare at once (it has started while cases ran, so a crash costs no
    start-up), and a new spare is started behind it.

    A worker that dies is blamed on the case it was running only if a fresh worker dies on that
    case too: native code can be left damaged by an earlier case and die at a later one (Paddle's
    backward of a `while` program can leave state that a later program's backward trips over:
    docs/paddle.md, finding 18), and a `crash` verdict names a case that replays as one."""

    def __init__(
        self, spec: str, timeout: float = 60.0, device: str = "cpu", spare: bool = True, fork: bool = True
    ) -> None:
        self.spec, self.timeout, self.device = spec, timeout, device
        self.proc: Worker | None = None
        # workers forked by a fork server (`_Zygote`), on the CPU (a GPU's driver state is not
        # to be forked); started from nothing where it cannot be had, or GRADCERT_FORK=0 says so
        self.fork = fork and device == "cpu" and os.environ.get("GRADCERT_FORK", "1") != "0"
        self.zygote: _Zygote | None = None
        self.zygote_log = tempfile.TemporaryFile(mode="w+")
        self.log: IO[str] = tempfile.TemporaryFile(mode="w+")  # the running worker's stderr
        self.keep_spare = spare
        self.spare: tuple[Worker, IO[str]] | None = None  # a started worker, and its log
        self.version = ""
        self.answered = 0  # cases the running worker has answered
        self.died: int | None = None  # the exit status of the last worker that died

    def _spawn(self) -> tuple[Worker, IO[str]]:
        """A worker process started (not waited for: it reports ready on its stdout), and its log:
        forked by the zygote, or started from nothing."""
        log = tempfile.TemporaryFile(mode="w+")
        if self.fork:
            try:
                if self.zygote is None or not self.zygote.alive():
                    if self.zygote is not None:
                        self.zygote.close()
                    self.zygote = _Zygote(self.spec, self.device, self.zygote_log)
                return self.zygote.fork(log), log
            except OSError:
                self.fork = False  # (no zygote to be had: workers started from nothing from now on)
        env = lifeline.watched(dict(os.environ, PYTHONUNBUFFERED="1"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "gradcert.conformance.isolation.worker", self.spec, self.device],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            preexec_fn=lifeline.preexec(),  # (it dies with this process: `lifeline.py`)
        )
        return proc, log

    def _start(self) -> Worker:
        """The spare (or, where there is none or it died, a worker started now) as the running
        worker, ready; a new spare started behind it."""
        took = self.spare
        self.spare = None
        if took is not None and took[0].poll() is not None:
            took[1].close()
            took = None
        self.proc, log = took if took is not None else self._spawn()
        self.log.close()
        self.log = log
        ready = self._read(max(self.timeout, 120.0))
        if not isinstance(ready, dict) or "ready" not in ready:
            self._kill()
            raise RuntimeError(f"backend worker for {self.spec!r} did not start: {self._log_tail()}")
        self.version = str(ready["ready"])
        self.answered = 0
        if self.keep_spare:
            self.spare = self._spawn()
        return self.proc

    def _read(self, timeout: float) -> dict[str, object] | str:
        assert self.proc is not None and self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return "timeout"
                line = self.proc.stdout.readline()
                if not line:
                    return "crash"
                if line.startswith("{"):
                    return json.loads(line)  # type: ignore[no-any-return]
        finally:
            sel.close()

    def _kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _log_tail(self) -> str:
        """The last lines the worker wrote (Python's warnings left out: they are not why it died)."""
        self.log.seek(0)
        lines = [ln.strip() for ln in self.log.read().splitlines() if ln.strip() and "warn" not in ln.lower()]
        self.log.seek(0)
        self.log.truncate()
        return " | ".join(lines[-6:])[-800:] or "(nothing)"

    def run(self, case: Case) -> BackendResult | Outcome:
        outcome = self._run(case)
        again = outcome is None and self.answered > 0
        if again:  # damage from an earlier case? ask a fresh worker
            self._log_tail()  # (drops the dead worker's log)
            outcome = self._run(case)
        if outcome is None:
            fresh = " (a fresh worker too)" if again else ""
            return Outcome(Status.CRASH, f"worker {_death(self.died)}{fresh}; its last lines: {self._log_tail()}")
        return outcome

    def _run(self, case: Case) -> BackendResult | Outcome | None:
        """The worker's answer; None where it died (its exit status in `self.died`)."""
        proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps({"case": case.to_text()}) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:  # it died after its last answer
            reply: dict[str, object] | str = "crash"
        else:
            reply = self._read(self.timeout)
        if reply == "timeout":
            self._kill()
            return Outcome(Status.TIMEOUT, f"no answer within {self.timeout:g} s")
        if reply == "crash":
            self.died = proc.wait()
            self.proc = None
            return None
        self.answered += 1
        assert isinstance(reply, dict)
        if "ok" in reply:
            return result_from_json(reply["ok"])  # type: ignore[arg-type]
        if "limit" in reply:
            return Outcome(Status.UNSUPPORTED, LIMIT + str(reply["limit"]), "AdapterLimit")
        if "unsupported" in reply:
            return Outcome(Status.UNSUPPORTED, str(reply["unsupported"]))
        err = reply["error"]
        assert isinstance(err, dict)
        return Outcome(Status.ERROR, f"{err['type']}: {err['message']}", str(err["type"]))

    def close(self) -> None:
        if self.spare is not None:
            spare, log = self.spare
            self.spare = None
            assert spare.stdin is not None
            spare.stdin.close()  # (it ends at the end of its input, ready or not)
            try:
                spare.wait(timeout=5)
            except subprocess.TimeoutExpired:
                spare.kill()
                spare.wait()
            log.close()
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
