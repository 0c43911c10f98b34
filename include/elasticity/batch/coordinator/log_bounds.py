"""Checkpointed offsets against the log they point into, at plan time: each input partition's log start (its
low watermark) and log end (its high watermark).

- A checkpoint above the log end: the topic was deleted and recreated (or its log lost), and its new records
  lie below the checkpoint, where reading on would never look. Always an error: no policy makes that right.
- A checkpoint below the log start: retention (or a DeleteRecords) removed records no task had processed.
  `task.input.truncation.policy=fail` (the default) stops the job there, naming them; `skip-to-earliest`
  moves on from the log start and declares the removed range (`LostRange`): the batch's metrics keep it and
  data quality reports it, so the loss is declared, never silent.

Watermarks (SEP-32's merge) need no check: records below the log start are gone whatever covers them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.jobmodel.model import SystemStreamPartition, TaskName

FAIL = "fail"
SKIP_TO_EARLIEST = "skip-to-earliest"


class InputTruncatedError(RuntimeError):
    """Records a task has yet to process are no longer in the log (or the log is not the one checkpointed)."""


@dataclass(frozen=True)
class LostRange:
    """Records [start, end) of a partition, of one virtual task's key bucket, removed before the task read them."""

    task_name: TaskName
    ssp: SystemStreamPartition  # the SSPKb
    start: int
    end: int

    def describe(self) -> str:
        return f"{self.ssp.stream}-{self.ssp.partition} offsets {self.start}..{self.end - 1} ({self.task_name.name})"

    def to_json(self) -> dict[str, object]:
        """As the batch's metrics keep it (data quality reads it back)."""
        s = self.ssp
        return {
            "task_name": self.task_name.name,
            "system": s.system,
            "stream": s.stream,
            "partition": s.partition,
            "key_bucket": s.key_bucket,
            "start": self.start,
            "end": self.end,
        }


def checked(
    cps: Mapping[TaskName, TaskCheckpoint],
    low: Mapping[SystemStreamPartition, int],
    high: Mapping[SystemStreamPartition, int],
    policy: str,
) -> dict[TaskName, TaskCheckpoint]:
    """The checkpoints to plan from: each offset within its partition's log, or an error.

    Invariants: no returned offset is below its partition's log start or above its log end; an offset is
    moved only under `skip-to-earliest`, and then from below the log start to it (`lost_ranges` declares it)."""
    out: dict[TaskName, TaskCheckpoint] = {}
    for name, cp in cps.items():
        offsets = dict(cp.offsets)
        for ssp, offset in cp.offsets.items():
            base = ssp.without_key_bucket()
            if base not in low or base not in high:
                continue  # a partition the broker did not report: planning names it
            if offset > high[base]:
                raise InputTruncatedError(
                    f"topic {ssp.stream!r} partition {ssp.partition}: the checkpoint of {name.name} is at offset {offset}, "
                    f"past the log's end {high[base]}: the topic was deleted and recreated (or its log lost). "
                    "Its records below the checkpoint would never be read; reset the job's checkpoints "
                    "(checkpoint-tool) to where the new log should be read from"
                )
            if offset < low[base]:
                if policy != SKIP_TO_EARLIEST:
                    raise InputTruncatedError(
                        f"topic {ssp.stream!r} partition {ssp.partition}: the checkpoint of {name.name} is at offset {offset}, "
                        f"but the log starts at {low[base]}: records {offset}..{low[base] - 1} were removed (retention "
                        "or DeleteRecords) before the job processed them. Set task.input.truncation.policy="
                        f"{SKIP_TO_EARLIEST} to go on from the log start, declaring them lost to data quality"
                    )
                offsets[ssp] = low[base]
        out[name] = cp if offsets == cp.offsets else replace(cp, offsets=offsets).collapsed()
    return out


def lost_ranges(cps: Mapping[TaskName, TaskCheckpoint], plan: BatchPlan) -> tuple[LostRange, ...]:
    """What a plan skips of its tasks' records: per SSPKb, [the task's checkpoint, its partition's range start).
    Derived from the plan and the committed checkpoints, so a replayed plan declares what its first attempt did."""
    starts = {r.ssp: r.start for r in plan.ranges}
    return tuple(
        LostRange(name, ssp, offset, starts[base])
        for name, cp in sorted(cps.items())
        for ssp, offset in sorted(cp.offsets.items())
        if (base := ssp.without_key_bucket()) in starts and offset < starts[base]
    )
