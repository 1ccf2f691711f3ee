"""The results file: one JSON line per verdict, appended (under a lock, flushed) the moment it is
known, so that a killed run loses nothing and a rerun skips finished cases. The line is handed to
the operating system at once; it is not fsynced (that guards against a machine crash, not a killed
run, and cost 0.6 ms a verdict: `bench/overhead.py`)."""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


class ResultsFileError(Exception):
    pass


class ResultsFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = None  # opened at the first verdict, kept open (appends only)

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record) + "\n"
        if self._file is None or self._file.closed:
            self._file = open(self.path, "a")
        f = self._file
        fcntl.flock(f, fcntl.LOCK_EX)  # workers append to one file: whole lines only
        try:
            f.write(line)
            f.flush()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def finished(self) -> dict[tuple[str, str], dict[str, Any]]:
        """(test id, case id) -> record, for every verdict already written."""
        return {(r["test_id"], r["case_id"]): r for r in read_records([self.path]) if "case_id" in r}


def read_records(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Every record of the files; a torn last line (a killed writer) is skipped, any other bad
    line is an error naming file and line."""
    for p in paths:
        path = Path(p)
        if not path.exists():
            continue
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                if n == len(lines):
                    continue
                raise ResultsFileError(f"{path}:{n}: not a JSON record: {e.msg}") from None
