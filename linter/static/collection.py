"""The pace of the cyclic garbage collector during a run.

A file's tree (CPython's `ast` for its facts, LibCST's for its lint) is hundreds of thousands
of small objects without cycles, freed by reference counting alone once the file is done (the
lint lets go of what refers to it: `FileContext.release`). A collection while a tree is alive
walks all of it and finds nothing to free.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the collector about a hundred times less often (forked workers inherit it). With
    CPython's default thresholds (a collection every 700 new objects) a tree kept while its
    file is linted reaches the oldest generation, whose full collections then scan every live
    object again and again: a quarter of a cold run's CPU time. mypy raises the thresholds
    for the same reason."""
    before = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextlib.contextmanager
def no_collections() -> Iterator[None]:
    """No collection within the block (the facts or the lint of one file): even at the pace
    of `fewer_collections`, a large file's tree set off several, each walking all of it (a
    twentieth of a cold run's CPU)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
