"""Processes that die with the process that started them, and the results file's lock, held
through the kernel by every process that writes it.

A run's processes (the child pytest, its xdist workers, the backend's worker processes) must not
outlive the run: a `certify` killed by SIGKILL (an OOM killer, a CI hard-kill) runs no handler,
and orphans left behind would go on appending to the results file beside a rerun. So:

- a child that gradcert starts with `subprocess.Popen` asks the kernel (Linux `prctl`
  PR_SET_PDEATHSIG) for SIGKILL when its parent dies (`preexec`, run in the child between fork
  and exec; the setting survives exec);
- a child started by code that gradcert does not control (pytest-xdist's workers, started by
  execnet) asks for the same itself at its start (`die_with_parent`), and exits at once where its
  parent is gone already (the fork-to-prctl race);
- where the kernel has no such call (not Linux), a watchdog thread polls the parent's pid.

The kernel's parent-death signal is sent when the *thread* that forked the child ends, so
`preexec` is used only from the main thread (a Ray task may run in another): elsewhere the
watchdog alone (`Popen(..., env=watched(env))`, polled by `die_with_parent` in the child).

The lock: `RESULTS.lock` beside the results file, `flock`ed. A starter (`certify`, `fuzz`, the
Ray driver) takes it exclusively — refused where anyone holds it — then turns it into a shared
lock; every process that writes the results file (the child pytest, each xdist worker) takes a
shared one of its own at its start (`share`). A flock belongs to the open file description and
goes with the last process holding it, however it dies, so a rerun is refused exactly while any
writer of the earlier run lives.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1
PARENT = "GRADCERT_PARENT_PID"  # the pid a child watches, where the kernel cannot (watchdog)
LOCK = "GRADCERT_RESULTS_LOCK"  # the lock file a run's writers hold shared (set by its starter)


def _prctl_deathsig(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def preexec(parent: int | None = None) -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel kill the child when this process dies; None (no
    preexec_fn) off the main thread, or where the kernel has no such call. Also makes the child
    exit where this process died before the call (`parent`: this process's pid)."""
    if threading.current_thread() is not threading.main_thread() or not sys.platform.startswith("linux"):
        return None
    pid = os.getpid() if parent is None else parent

    def set_deathsig() -> None:
        if _prctl_deathsig(signal.SIGKILL) and os.getppid() != pid:
            os._exit(1)  # (the parent died before the call: the signal will never come)

    return set_deathsig


def watched(env: dict[str, str]) -> dict[str, str]:
    """`env` naming this process as the parent a child's `die_with_parent` watches."""
    return {**env, PARENT: str(os.getpid())}


def die_with_parent(parent: int | None = None, poll: float = 0.5) -> None:
    """Called by a child at its start: SIGKILL from the kernel when its parent dies (Linux), and
    a watchdog thread that exits the process when the parent's pid is no longer its parent's
    (where `parent`, or the environment's GRADCERT_PARENT_PID, names it, or where the kernel's
    signal is not to be had). Exits at once where the parent is gone already."""
    expected = parent if parent is not None else int(os.environ.get(PARENT, "0") or 0)
    kernel = _prctl_deathsig(signal.SIGKILL)
    if not expected:
        if kernel:
            return  # (the parent now is the one the kernel watches)
        expected = os.getppid()
    if os.getppid() != expected:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(poll)
        os._exit(1)

    threading.Thread(target=watch, name="gradcert-lifeline", daemon=True).start()


class Held(Exception):
    """The lock is held by a live run (its pid, as the file names it)."""

    def __init__(self, pid: str) -> None:
        super().__init__(pid)
        self.pid = pid


def lock_path(results: str | Path) -> Path:
    p = Path(results)
    return p.with_name(p.name + ".lock")


def start(results: str | Path) -> int:
    """A starter's hold on `results`' lock: taken exclusively (Held where a live run holds it),
    its pid written, then turned shared so the run's writers can join; returns the fd (closing it
    lets go: `release`)."""
    lock = lock_path(results)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        # (a conversion is not atomic: a starter that takes the lock in between wins, and this
        # one is refused)
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise Held(pid) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def share(lock: str | Path) -> int:
    """A writer's hold on a run's lock (shared, beside its starter's and the other writers');
    Held where another run holds it exclusively (this process's run is over: it must not write).
    Returns the fd, kept open for the process's life."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise Held(pid) from None
    return fd


def release(fd: int) -> None:
    os.close(fd)
