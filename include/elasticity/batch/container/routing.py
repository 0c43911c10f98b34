"""Routing: which virtual task a record goes to, and whether that task has processed it already.

Defined here once. The engine's slots (`reader.route`, as they read), the app test harness and the model
tests' reference runner all run `route_records`, so a test of either proves the routing production runs.

    bucket  = pmod(record_hash(key, offset), F), NO_KEY_BUCKET at F = 1 (SEP-32's key bucket)
    task    = the owner of (partition, bucket) in the generation's checkpoints
    skipped = offset < the task's offset, or one of the task's merge watermarks covers the record
              (`Watermark.covers`: the records a faster task processed before the merge)

A record is read by every slot that reads its partition, and kept by the one slot of its task, at most once.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.jobmodel.keybucket import record_hash
from elasticity.jobmodel.model import NO_KEY_BUCKET, TaskName

Owner = tuple[str, int, tuple[Watermark, ...], int]  # task name, its start offset, its watermarks, its process slot
Partition = tuple[str, str, int]  # an input partition: system, stream, partition


@dataclass(frozen=True)
class RouteTable:
    """Per input partition and key bucket: the owning virtual task (a generation's ownership, one batch's offsets)."""

    factor: int
    owners: dict[Partition, dict[int, Owner]]
    weighed: tuple[int, ...] = ()  # factors whose busiest key bucket the reads count (`bucket_load`): the autosizer's

    @classmethod
    def of(
        cls, factor: int, cps: Mapping[TaskName, TaskCheckpoint], slots: Mapping[TaskName, int], weighed: tuple[int, ...] = ()
    ) -> RouteTable:
        """Each SSPKb of the checkpoints to its task, the offset the task has processed up to, its watermarks
        and its process slot."""
        owners: dict[Partition, dict[int, Owner]] = {}
        for name, cp in cps.items():
            for ssp, offset in cp.offsets.items():
                owners.setdefault((ssp.system, ssp.stream, ssp.partition), {})[ssp.key_bucket] = (
                    name.name,
                    offset,
                    cp.watermarks.get(ssp, ()),
                    slots[name],
                )
        return cls(factor, owners, weighed)


@dataclass(frozen=True, kw_only=True)
class Routes:
    """Where one read of a partition goes, for one process slot: the records the slot keeps (their positions in
    the read, in read order) with their key bucket and task; per task of the slot, the records of its buckets
    read and those skipped as processed already (read = kept + skipped); every record's hash, and the time spent
    hashing keys."""

    kept: list[int]
    buckets: list[int]
    tasks: list[str]
    read: Counter[str]
    skipped: Counter[str]
    hashes: list[int]
    hash_ns: int


def route_records(
    table: RouteTable, partition: Partition, keys: Sequence[bytes | None], offsets: Sequence[int], *, slot: int
) -> Routes:
    """The records (`keys[i]` at `offsets[i]` of `partition`) that slot `slot` processes, by the rule above.

    Pure but for the clock: the same records and table give the same routes, whichever slot, batch or process
    asks. One pass over the records, a C hash each: the reader calls it on every record it reads."""
    # per key bucket of the partition: its task, offset and watermarks when the task is the slot's, else None
    mine = {b: (name, first, marks) if s == slot else None for b, (name, first, marks, s) in table.owners[partition].items()}
    start = time.perf_counter_ns()
    hashes = [record_hash(k, o) for k, o in zip(keys, offsets, strict=True)]
    hash_ns = time.perf_counter_ns() - start
    factor = table.factor
    kept: list[int] = []
    buckets: list[int] = []
    tasks: list[str] = []
    skipped: Counter[str] = Counter()
    keep, bucket, task = kept.append, buckets.append, tasks.append
    for i, (h, offset) in enumerate(zip(hashes, offsets, strict=True)):
        b = h % factor if factor > 1 else NO_KEY_BUCKET
        owner = mine[b]
        if owner is None:
            continue
        name, first, marks = owner
        if offset < first or (marks and any(w.covers(h, offset) for w in marks)):
            skipped[name] += 1
            continue
        keep(i)
        bucket(b)
        task(name)
    read = Counter(tasks)
    read.update(skipped)
    return Routes(kept=kept, buckets=buckets, tasks=tasks, read=read, skipped=skipped, hashes=hashes, hash_ns=hash_ns)
