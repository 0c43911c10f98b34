"""Which of a process slot's virtual tasks run side by side: slices dealt into units, one pass of the operator
graph each, on the slot's thread or the pool's, as the app's pass history says (Samza's
`job.container.thread.pool.size`)."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar


@dataclass
class PassHistory:
    """Whether an app's passes wait or compute, learnt in each Python worker from its own passes: the pool's
    threads overlap slices that wait (a lookup, a sleep), but for slices that compute the GIL runs one thread at
    a time and the threads only add switches (a 0 ms app at 4,096 virtual tasks spent a third of its process
    stage on 256 threads). A pass on the pool that kept its threads busy (thread CPU over the pass's time, at
    least BUSY) is followed by a pass on the slot's own thread, which shows how long the slices wait: more than
    half of its time, and the pool comes back for `backoff` passes (doubling each time, so an app that both
    computes and waits is tried on one thread rarely)."""

    BUSY = 0.7
    WAITING = 0.5

    single: bool = False  # the next pass runs its units one after another on the slot's thread
    pool_passes: int = 0  # passes left on the pool before one thread is tried again
    backoff: int = 8

    def observe(self, *, single: bool, cpu_ns: int, wall_ns: int) -> None:
        busy = cpu_ns / wall_ns if wall_ns > 0 else 1.0
        if single:
            if busy < self.WAITING:
                self.single, self.pool_passes, self.backoff = False, self.backoff, min(2 * self.backoff, 4096)
        elif self.pool_passes > 0:
            self.pool_passes -= 1
        elif busy >= self.BUSY:
            self.single = True


@dataclass(frozen=True)
class Slice:
    """A virtual task's records: rows [start, end) of the slot's sorted records."""

    name: str
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def deal_units(tasks: list[Slice], threads: int, *, alone: bool) -> list[tuple[Slice, ...]]:
    """The slices dealt into at most `threads` units, each run as one pass of the operator graph on one thread,
    the largest first: at thousands of small virtual tasks a pass per slice cost more than its records. Dealt
    longest first to the unit with the fewest records so far, which bounds a unit of I/O-bound tasks as the
    pool's threads taking slice after slice would. A window's timer fires per task (`alone`): a slice a unit."""
    if alone or len(tasks) <= threads:
        return [(t,) for t in sorted(tasks, key=lambda t: -t.size)]
    bins: list[list[Slice]] = [[] for _ in range(threads)]
    loads = [(0, i) for i in range(threads)]
    for t in sorted(tasks, key=lambda t: -t.size):
        load, i = heapq.heappop(loads)
        bins[i].append(t)
        heapq.heappush(loads, (load + t.size, i))
    units = [tuple(sorted(b, key=lambda t: t.start)) for b in bins if b]
    return sorted(units, key=lambda u: -sum(t.size for t in u))


U = TypeVar("U")
R = TypeVar("R")


def side_by_side(run: Callable[[U], R], units: list[U], threads: int, pool: ThreadPoolExecutor) -> list[R]:
    """`run` over the units on `threads` threads of `pool`, each taking the next unit as it finishes one (in the given
    order); every unit runs, and the first failure in that order is raised once all have ended."""
    done: list[Any] = [None] * len(units)
    errors: list[BaseException | None] = [None] * len(units)
    queue = iter(enumerate(units))
    lock = threading.Lock()

    def runner() -> None:
        while True:
            with lock:
                i = next(queue, None)
            if i is None:
                return
            try:
                done[i[0]] = run(i[1])
            except BaseException as e:  # noqa: BLE001 - raised below, after the other units
                errors[i[0]] = e

    for f in [pool.submit(runner) for _ in range(min(threads, len(units)))]:
        f.result()
    failure = next((e for e in errors if e is not None), None)
    if failure is not None:
        raise failure
    return done
