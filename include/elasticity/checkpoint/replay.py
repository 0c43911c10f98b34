"""A replay: the job reprocesses its input from a time, or from the earliest retained offset, as a new
generation (Kafka Streams' application reset tool `--to-datetime` / `--to-earliest`, Spark's Kafka source
`startingTimestamp`, Flink's restart from a chosen position).

Pure parts: where each input partition starts, from the answers of Kafka's ListOffsets by timestamp (the
earliest offset whose record timestamp is at or after the time; none when no record is, and then the
partition's end: nothing of it is replayed); the new generation's checkpoints from the old ones; and the
`Replay` record the generation keeps (JSON in its row), which data quality and the job page read back.

A replay never starts a virtual task past what it has processed: a bucket whose checkpoint is below the
time's offset goes on from its checkpoint (with its watermarks), so no record is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.checkpoint.tool import checkpoints_from_tool_json, checkpoints_to_tool_json
from elasticity.jobmodel.model import JobModel, SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import ssp_from_key, ssp_to_key

EARLIEST = "earliest"


class OutputMode(StrEnum):
    """What becomes of the outputs of the replayed range: a new version beside the old (told apart by the
    `generation` column), or the old rows of the range removed once the replay is written."""

    NEW_VERSION = "new-version"
    REPLACE = "replace"


class ReplayError(ValueError):
    """A replay refused; nothing was changed."""


@dataclass(frozen=True, kw_only=True)
class ReplayFrom:
    """Where a replay starts: a time (epoch ms, record timestamps) or, with None, the earliest retained offset."""

    timestamp_ms: int | None

    @classmethod
    def parse(cls, text: str) -> ReplayFrom:
        """`earliest`, epoch milliseconds, or an ISO 8601 time (UTC unless it names its offset)."""
        text = text.strip()
        if text.lower() == EARLIEST:
            return cls(timestamp_ms=None)
        if text.isdigit():
            return cls(timestamp_ms=int(text))
        try:
            t = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ReplayError(
                f"replay time {text!r}: expected 'earliest', epoch milliseconds or an ISO 8601 time such as 2026-11-29T04:00:00Z"
            ) from None
        return cls(timestamp_ms=int((t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp() * 1000))

    def describe(self) -> str:
        if self.timestamp_ms is None:
            return "the earliest retained offset"
        return (
            f"{datetime.fromtimestamp(self.timestamp_ms / 1000, UTC).isoformat(timespec='milliseconds')} ({self.timestamp_ms} ms)"
        )


@dataclass(frozen=True, kw_only=True)
class PartitionStart:
    """Where one input partition's replay starts, and why."""

    ssp: SystemStreamPartition
    offset: int
    log_start: int
    log_end: int
    found: bool  # a record at or after the time exists (False: none, the partition's end)

    @property
    def retention_gap(self) -> bool:
        """Records the replay may need were removed by retention: it starts at the log's start, which is not 0,
        at a record at or after the time or in an empty log (a log whose retained records are all before the time
        lost older ones only)."""
        return self.offset == self.log_start > 0 and (self.found or self.log_end == self.log_start)

    def describe(self) -> str:
        where = f"{self.ssp.system}.{self.ssp.stream}.{self.ssp.partition}"
        if not self.found:
            return f"{where}: no record at or after the time, starts at its end {self.offset}"
        gap = ", the log's start (retention removed the records before it)" if self.retention_gap else ""
        return f"{where}: starts at offset {self.offset} (log {self.log_start}..{self.log_end}){gap}"


def choose_starts(
    frm: ReplayFrom,
    answers: Mapping[SystemStreamPartition, int | None],
    log_starts: Mapping[SystemStreamPartition, int],
    log_ends: Mapping[SystemStreamPartition, int],
) -> dict[SystemStreamPartition, PartitionStart]:
    """Per input partition, where the replay starts. `answers`: ListOffsets by the time (None or a negative
    offset: no record at or after it); ignored from the earliest, which starts at the log start. An answer
    outside the log's bounds is brought inside them."""
    out = {}
    for ssp, end in sorted(log_ends.items()):
        start = log_starts[ssp]
        if frm.timestamp_ms is None:
            out[ssp] = PartitionStart(ssp=ssp, offset=start, log_start=start, log_end=end, found=end > start)
            continue
        answer = answers.get(ssp)
        found = answer is not None and answer >= 0
        offset = min(max(answer, start), end) if found and answer is not None else end
        out[ssp] = PartitionStart(ssp=ssp, offset=offset, log_start=start, log_end=end, found=found)
    return out


def replay_checkpoints(
    model: JobModel, old: Mapping[TaskName, TaskCheckpoint], starts: Mapping[SystemStreamPartition, PartitionStart]
) -> dict[TaskName, TaskCheckpoint]:
    """The new generation's checkpoints: each virtual task starts each of its SSPKbs at the replay's start, or
    where it is when that is earlier (then its watermarks stay, cut at the start: what it processed past the
    start is processed again); no state."""
    out = {}
    for task in model.tasks():
        prior = old.get(task.task_name)
        offsets: dict[SystemStreamPartition, int] = {}
        marks = {}
        for ssp in task.system_stream_partitions:
            base = ssp.without_key_bucket()
            if base not in starts:
                raise ReplayError(f"no start offset for input partition {base} of task {task.task_name.name!r}")
            at = starts[base].offset
            was = prior.offsets.get(ssp) if prior is not None else None
            if was is not None and was <= at:
                offsets[ssp] = was  # what it processed past the start is processed again: watermarks cut at the start
                cut = tuple(Watermark(w.factor, w.bucket, min(w.offset, at)) for w in prior.watermarks.get(ssp, ()))  # type: ignore[union-attr]
                if kept := tuple(w for w in cut if w.offset > was):
                    marks[ssp] = kept
            else:
                offsets[ssp] = at
        out[task.task_name] = TaskCheckpoint(task_name=task.task_name, offsets=offsets, watermarks=marks)
    return out


@dataclass(frozen=True, kw_only=True)
class Replay:
    """What a replay's generation keeps: asked from when and why, the output mode, where each input partition
    starts, and the checkpoints it started from and left behind (the previous version's last ones)."""

    requested: ReplayFrom
    reason: str
    outputs: OutputMode
    factor: int
    starts: Mapping[SystemStreamPartition, int]
    start_checkpoints: Mapping[TaskName, TaskCheckpoint]
    previous_checkpoints: Mapping[TaskName, TaskCheckpoint]

    def replayed(self) -> dict[SystemStreamPartition, tuple[int, int]]:
        """Per input partition, the offsets [from, to) the previous version had processed and this one processes
        again (to: the least of the previous version's bucket offsets: what every bucket had passed)."""
        ends: dict[SystemStreamPartition, int] = {}
        for cp in self.previous_checkpoints.values():
            for ssp, offset in cp.offsets.items():
                base = ssp.without_key_bucket()
                ends[base] = min(offset, ends.get(base, offset))
        return {s: (o, max(o, ends.get(s, o))) for s, o in sorted(self.starts.items())}

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "from": EARLIEST if self.requested.timestamp_ms is None else self.requested.timestamp_ms,
            "reason": self.reason,
            "outputs": str(self.outputs),
            "factor": self.factor,
            "starts": {ssp_to_key(s): o for s, o in sorted(self.starts.items())},
            "start-checkpoints": checkpoints_to_tool_json(self.start_checkpoints.values()),
            "previous-checkpoints": checkpoints_to_tool_json(self.previous_checkpoints.values()),
        }
        return json.dumps(doc, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Replay:
        d = json.loads(text)
        frm = d["from"]
        return cls(
            requested=ReplayFrom(timestamp_ms=None if frm == EARLIEST else int(frm)),
            reason=d["reason"],
            outputs=OutputMode(d["outputs"]),
            factor=int(d["factor"]),
            starts={ssp_from_key(k): int(o) for k, o in d["starts"].items()},
            start_checkpoints={cp.task_name: cp for cp in checkpoints_from_tool_json(d["start-checkpoints"])},
            previous_checkpoints={cp.task_name: cp for cp in checkpoints_from_tool_json(d["previous-checkpoints"])},
        )

    def describe(self) -> str:
        return f"replay from {self.requested.describe()}, outputs as {self.outputs} ({self.reason})"
