"""The rules of one micro-batch, pure so that the Spark engine, the app test harness
and the reference runner in the tests apply the very same ones (routing is the
slots' own: `batch.container.routing.route_records`).

plan:    per SSP, read from the min of its virtual tasks' offsets (SEP-32) to
         the high watermark, the whole batch capped at `batch.max.records`,
         and every batch moves while there is lag, whatever the cap;
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

from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.jobmodel.model import SystemStreamPartition, TaskName


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
    """Ranges up to the high watermarks, at most `max_records` (>= 1) in all.

    Over the cap, every lagging SSP takes one record and the rest of the cap is
    shared in proportion to lag (largest remainders first), so the batch reads
    exactly the cap. A cap smaller than the number of lagging SSPs
    gives one record each to a window of them that rotates with the progress
    made (the sum of the start offsets), so they take turns and every batch
    moves: a cap of 1 still drains a topic, one record at a time.
    """
    if max_records < 1:
        raise ValueError(f"batch cap {max_records}: expected an integer >= 1 (batch.max.records or --max-records)")
    starts = start_offsets(checkpoints)
    missing = set(starts) - set(high_watermarks)
    if missing:
        raise ValueError(f"no high watermark for {sorted(missing)}")
    lags = {s: max(0, high_watermarks[s] - start) for s, start in starts.items()}
    total = sum(lags.values())
    lagging = sorted(s for s, lag in lags.items() if lag > 0)
    if total <= max_records:
        take = lags
    elif max_records < len(lagging):
        turn = sum(starts.values()) % len(lagging)
        take = dict.fromkeys((lagging[turn:] + lagging[:turn])[:max_records], 1)
    else:
        rest, spare = max_records - len(lagging), total - len(lagging)
        shares = {s: (lags[s] - 1) * rest for s in lagging}
        take = {s: 1 + shares[s] // spare for s in lagging}
        # the largest remainders take what rounding down left over: a batch over the cap reads exactly the cap
        left = max_records - sum(take.values())
        for s in sorted(lagging, key=lambda s: (-(shares[s] % spare), s))[:left]:
            take[s] += 1
    return tuple(OffsetRange(s, starts[s], starts[s] + take.get(s, 0)) for s in sorted(starts))


def advance(
    cp: TaskCheckpoint, ranges: Iterable[OffsetRange], stopped: Mapping[SystemStreamPartition, int] | None = None
) -> TaskCheckpoint:
    """The checkpoint of a task that has processed its records of `ranges`.

    `stopped` maps an SSPKb of the task to the first offset it did not process,
    when it did not finish its slice.
    """
    return _advanced(cp, {r.ssp: r.end for r in ranges}, stopped or {})


def advance_all(
    cps: Mapping[TaskName, TaskCheckpoint],
    ranges: Iterable[OffsetRange],
    stopped: Mapping[TaskName, Mapping[SystemStreamPartition, int]],
) -> dict[TaskName, TaskCheckpoint]:
    """`advance` for every task of a batch, the ranges' ends looked up once (thousands of virtual tasks)."""
    ends = {r.ssp: r.end for r in ranges}
    return {name: _advanced(cp, ends, stopped.get(name, {})) for name, cp in cps.items()}


def _advanced(
    cp: TaskCheckpoint, ends: Mapping[SystemStreamPartition, int], stopped: Mapping[SystemStreamPartition, int]
) -> TaskCheckpoint:
    offsets = {s: max(o, stopped.get(s, ends.get(s.without_key_bucket(), o))) for s, o in cp.offsets.items()}
    if cp.watermarks:
        return TaskCheckpoint(task_name=cp.task_name, offsets=offsets, watermarks=cp.watermarks).collapsed()
    return TaskCheckpoint.of_offsets(cp.task_name, offsets)
