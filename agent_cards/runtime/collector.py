"""The cyclic garbage collector as this project's long-running processes set it.

CPython frees most objects by reference counting; its cyclic collector also walks the
container objects now and then, the youngest every 700 allocations and, once enough have
been promoted, every object the process holds. A service holds some 110,000 of them
after start-up (modules, functions, classes, pydantic's schemas) and allocates a few
thousand a request, most of which live for one request. Measured on the coordinator
under figure (2)'s load (``python -m bench.coordinator_cpu``; collections timed in CPU
time through ``gc.callbacks``), the collector took 190 ms of every 6 s of handoffs at
c=8 and 410-500 ms at c=32, 7-12% of the process, most of it in whole-heap collections
of 80-150 ms each that walked the start-up objects again and again.

:func:`settle` sets two things once start-up is over:

- ``gc.freeze()``: what start-up allocated is moved out of the collector's sight for
  good, so a whole-heap collection walks only what the process made since (a collection
  right after start-up finds nothing to free, so nothing is kept that could be freed);
- the youngest generation collected every :data:`YOUNG_THRESHOLD` allocations instead
  of 700: most of a request's objects are freed by their counts before a collection
  could walk them (the two older thresholds are Python's).

Every coordinator command (:func:`coordinator.loop.run`), the coordinator's API and every
member the kit serves call it before serving; it acts once in a process (a process that
runs several commands, a test run say, freezes what it held at the first of them and
nothing after). ``FEDERATION_GC=default`` keeps Python's own settings.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping

GC_ENV = "FEDERATION_GC"
YOUNG_THRESHOLD = 10_000

_settled: list[bool] = []  # one entry once this process has settled its collector


def settle(env: Mapping[str, str] = os.environ) -> bool:
    """Freeze what start-up allocated and collect the youngest generation less often,
    once in the process and unless ``FEDERATION_GC=default``; whether it did so now."""
    if _settled or env.get(GC_ENV, "").strip().lower() == "default":
        return False
    _settled.append(True)
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
    return True
