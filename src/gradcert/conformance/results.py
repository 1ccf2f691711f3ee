"""The results file: one JSON line per verdict, appended the moment it is known, so that a killed
run loses nothing and a rerun skips finished cases. Each line is one `write` to a file opened for
appending: the system appends it whole, at the end, even where worker processes append to one
file at once (a lock around a buffered write and flush cost three more system calls a verdict). The
line is handed to the operating system at once; it is not fsynced (that guards against a machine
crash, not a killed run, and costs more than judging a small case: `bench/overhead.py`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gradcert.conformance.verdicts import Status


class ResultsFileError(Exception):
    pass


class ResultsFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = None  # opened at the first verdict, kept open (appends only)

    def append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record) + "\n").encode()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        while data:  # (a regular file takes all of it at once, but for a disk filling up)
            data = data[os.write(self._fd, data) :]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def finished(self) -> Iterator[tuple[tuple[str, str], tuple[str, str, str, str, str]]]:
        """((test id, draw or case id), (status, oracle, message, kind, culprit)) of every verdict already
        written, in order (a drawn case is named by its draw: a rerun draws it again before it has
        its text)."""
        for r in read_records([self.path]):
            if "case_id" in r:
                yield (
                    (r["test_id"], r.get("draw") or r["case_id"]),
                    (
                        r["status"],
                        r.get("oracle", ""),
                        r.get("message", ""),
                        r.get("kind", ""),
                        r.get("culprit", ""),
                    ),
                )


def progress_path(results: str | Path) -> Path:
    """Beside a results file, the run's notes for its live line that are no verdicts (the defect
    a test is shrinking): `RESULTS.progress`, JSON lines."""
    p = Path(results)
    return p.with_name(p.name + ".progress")


def unsupported_record(backend: Any, area: str, test: str, why: str, profile: str, seed: int) -> dict[str, Any]:
    """One `unsupported` verdict for a whole test whose area needs a capability `backend` lacks:
    on record, so that a report shows the area as not tested rather than leaving it out."""
    return {
        "test_id": test,
        "case_id": "",
        "area": area,
        "backend": backend.name,
        "backend_version": backend.version,
        "profile": profile,
        "seed": seed,
        "time": time.time(),
        "status": Status.UNSUPPORTED,
        "oracle": "capabilities",
        "message": why,
    }


def read_records(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Every record of the files, read line by line (a night's fuzzing writes gigabytes); a torn
    last line (a killed writer) is skipped, any other bad line is an error naming file and line."""
    for p in paths:
        path = Path(p)
        if not path.exists():
            continue
        with open(path, encoding="utf-8") as f:
            bad: tuple[int, str] | None = None  # a line that is not a record: torn, if it is the last
            for n, line in enumerate(f, 1):
                if bad is not None:
                    raise ResultsFileError(f"{path}:{bad[0]}: not a JSON record: {bad[1]}")
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    bad = (n, e.msg)
                    continue
                yield record
