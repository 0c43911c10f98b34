"""The rules of one micro-batch, pure so that the Spark engine and the reference
runner in the tests apply the very same ones.

plan:    per SSP, read from the min of its virtual tasks' offsets (SEP-32) to
         the high watermark, the whole batch capped at `batch.max.records`;
route:   a record goes to the virtual task of its key bucket; it is skipped when
         below that task's offset or covered by one of its watermarks;
advance: after the batch, a task's offset on an SSP is max(offset, range end),
         or, for a task that stopped early (a slow slice cut off at its time
         budget), the first record it did not process; the watermarks that
         offset has passed are dropped. This is where virtual tasks of one SSP
         drift apart, and why each keeps its own checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .checkpoint.model import TaskCheckpoint, Watermark
from .keybucket import record_hash
from .model import NO_KEY_BUCKET, SystemStreamPartition, TaskName


@dataclass(frozen=True, order=True)
class OffsetRange:
    """[start, end) of one input partition (SSP without bucket)."""

    ssp: SystemStreamPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class BatchPlan:
    job_name: str
    batch_id: int
    generation: int
    ranges: tuple[OffsetRange, ...]

    @property
    def records(self) -> int:
        return sum(r.size for r in self.ranges)


def start_offsets(checkpoints: Iterable[TaskCheckpoint]) -> dict[SystemStreamPartition, int]:
    """Per input partition, the min offset over its virtual tasks."""
    starts: dict[SystemStreamPartition, int] = {}
    for cp in checkpoints:
        for ssp, offset in cp.offsets.items():
            base = ssp.without_key_bucket()
            starts[base] = min(offset, starts.get(base, offset))
    return starts


def plan_ranges(
    checkpoints: Iterable[TaskCheckpoint], high_watermarks: Mapping[SystemStreamPartition, int], max_records: int
) -> tuple[OffsetRange, ...]:
    """Ranges up to the high watermarks; over the cap, each SSP gets a share proportional to its lag."""
    starts = start_offsets(checkpoints)
    missing = set(starts) - set(high_watermarks)
    if missing:
        raise ValueError(f"no high watermark for {sorted(missing)}")
    lags = {s: max(0, high_watermarks[s] - start) for s, start in starts.items()}
    total = sum(lags.values())
    ranges = []
    for ssp in sorted(starts):
        take = lags[ssp]
        if total > max_records:
            take = lags[ssp] * max_records // total
            if take == 0 and lags[ssp] > 0 and max_records >= len(lags):
                take = 1  # every lagging partition moves a little
        ranges.append(OffsetRange(ssp, starts[ssp], starts[ssp] + take))
    return tuple(ranges)


@dataclass(frozen=True)
class Route:
    task_name: TaskName
    ssp: SystemStreamPartition  # the SSPKb
    skip: bool


class Router:
    """Which virtual task owns a record, and whether it has processed it already."""

    def __init__(self, factor: int, checkpoints: Iterable[TaskCheckpoint]) -> None:
        self.factor = factor
        self._owner: dict[SystemStreamPartition, tuple[TaskName, int, tuple[Watermark, ...]]] = {}
        for cp in checkpoints:
            for ssp, offset in cp.offsets.items():
                self._owner[ssp] = (cp.task_name, offset, cp.watermarks.get(ssp, ()))

    def route(self, ssp: SystemStreamPartition, key: bytes | None, offset: int) -> Route:
        h = record_hash(key, offset)
        bucket = h % self.factor if self.factor > 1 else NO_KEY_BUCKET
        sspkb = ssp.with_key_bucket(bucket)
        task, start, marks = self._owner[sspkb]
        skip = offset < start or any(w.covers(h, offset) for w in marks)
        return Route(task, sspkb, skip)


def advance(
    cp: TaskCheckpoint, ranges: Iterable[OffsetRange], stopped: Mapping[SystemStreamPartition, int] | None = None
) -> TaskCheckpoint:
    """The checkpoint of a task that has processed its records of `ranges`.

    `stopped` maps an SSPKb of the task to the first offset it did not process,
    when it did not finish its slice.
    """
    ends = {r.ssp: r.end for r in ranges}
    stopped = stopped or {}
    offsets = {s: max(o, stopped.get(s, ends.get(s.without_key_bucket(), o))) for s, o in cp.offsets.items()}
    return TaskCheckpoint(cp.task_name, offsets, cp.watermarks).collapsed()
