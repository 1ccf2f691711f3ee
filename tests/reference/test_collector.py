"""`gradcert.reference.collector.paused`: the cyclic collector off over a block, on again after it, and
what the block left collected young where asked."""

from __future__ import annotations

import gc
import weakref

from gradcert.reference.collector import paused


class Node:
    me: object


def cycle() -> weakref.ref[Node]:
    """A garbage cycle: only the collector frees it."""
    a = Node()
    a.me = a
    return weakref.ref(a)


def test_paused_restores_the_collector_and_collects_what_the_block_left_young() -> None:
    gc.collect()
    with paused(collect_young=True):
        assert not gc.isenabled()
        left = cycle()
        assert left() is not None
    assert gc.isenabled() and left() is None
    with paused():
        kept = cycle()
    assert gc.isenabled() and kept() is not None  # not asked to collect: the collector's schedule
    gc.collect()
    assert kept() is None


def test_a_block_inside_a_paused_one_and_a_collector_turned_off_stay_off() -> None:
    with paused():
        with paused(collect_young=True):
            inner = cycle()
        assert not gc.isenabled() and inner() is not None  # (the outer block's to collect)
    assert gc.isenabled()
    gc.disable()
    try:
        with paused(collect_young=True):
            off = cycle()
        assert not gc.isenabled() and off() is not None
    finally:
        gc.enable()
    gc.collect()
