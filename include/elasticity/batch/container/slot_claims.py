"""Which process slot a Spark task runs, when every slot runs in one local Spark (master local[N]).

A slot's stores (and tables) stay open in the Python worker that ran it last (`state.worker`). Spark hands a
batch's tasks to its idle Python workers in the order they came back, so slot 0's task may get the worker that
holds slot 1's stores: both sets are then closed in one process and opened in the other (here 8 to 60 % of a
stateful job's task-batches, some 8 ms of CPU a store). Under a local master every task of a batch runs on this
host and sees the same folder: each claims, with an exclusive create, the slot its process ran last, else its
own, else the lowest one left. N tasks and N slots, each claim taken once: every slot runs exactly once a batch.
A retried task (local[N,F]) takes the claim its partition made before it failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from elasticity.process_registry import PROCESS

STALE_S = 600.0  # claim folders of earlier batches older than this are removed
SWEEP_EVERY_S = 60.0  # at most this often per process: a sweep lists every batch's folder of the last STALE_S


@dataclass
class ClaimSweep:
    """When this process last swept old claim folders (held by the process registry): once a minute, not per task."""

    last: float = float("-inf")


def claim(folder: Path, partition: int, slots: int, prefer: int | None) -> int:
    """The slot the task of `partition` runs in this batch (`folder`: the batch's claims)."""
    _sweep(folder.parent)
    folder.mkdir(parents=True, exist_ok=True)
    for f in folder.iterdir():  # a retry of this partition's task: the slot it claimed
        with contextlib.suppress(OSError, ValueError):
            if int(f.read_text()) == partition:
                return int(f.name)
    order = [s for s in (prefer, partition) if s is not None and 0 <= s < slots]
    for slot in dict.fromkeys([*order, *range(slots)]):
        try:
            fd = os.open(folder / str(slot), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as out:
            out.write(str(partition))
        return slot
    raise RuntimeError(f"no process slot left to claim in {folder} for partition {partition} of {slots}")


def _sweep(root: Path) -> None:
    sweep = PROCESS.get(ClaimSweep)
    now = time.monotonic()
    if now - sweep.last < SWEEP_EVERY_S or not root.is_dir():
        return
    sweep.last = now
    cutoff = time.time() - STALE_S
    for d in root.iterdir():
        with contextlib.suppress(OSError):
            if d.stat().st_mtime < cutoff:
                shutil.rmtree(d, ignore_errors=True)
