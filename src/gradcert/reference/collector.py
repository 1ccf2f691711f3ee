"""Pausing Python's cyclic collector over work that builds many objects it need not scan.

The collector runs every 700 allocations and walks what was allocated since; work that builds a
large structure (a backward program, a report's records) or many short-lived cycles (a case's
programs) makes it walk the same live objects again and again. Measured where it is used: the
backward (`reference/autodiff/backward.py`), the search's cases (`conformance/judging.py`), the report."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused(collect_young: bool = False) -> Iterator[None]:
    """The collector off for the block, on again after it; with `collect_young`, then a collection
    of the youngest generation (what the block left: its garbage, still young). A collector the
    caller turned off stays off, and nothing is collected."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        if collect_young:
            gc.collect(0)
