"""Runs, the floor above judging: `certify`, `fuzz` (on this machine or a Ray `cluster`), `check`
and `replay`, each taking one `RunOptions` (`options.py`, with the set-up they share); a run's
child pytest, lock, progress and records (`lifecycle.py`); how a run ends (`ending.py`). The
`gradcert` command parses its arguments into `RunOptions` and calls one of them; the report a run
writes is rendered by `gradcert.reports`, handed in as a `Render`."""
