"""Checkpoint value types.

Offsets here are *next to process* (Kafka's convention), as integers; the
Samza formats carry them as strings.

A `Watermark` is what lets a rescale go further than SEP-32 without duplicates.
It is a fact about an earlier generation: "every record of this SSP whose hash is
`bucket` mod `factor` and whose offset is below `offset` has been processed".
A virtual task that starts below such an offset (because a merge took the min of
its siblings) skips the records the fact covers, instead of processing them again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import count

from elasticity.jobmodel.model import SystemStreamPartition, TaskName

_nano = count()


@dataclass(frozen=True, order=True)
class CheckpointId:
    """Samza's `<millis>-<nanoId>`: ordered by time, unique within a process."""

    millis: int
    nano_id: int

    @classmethod
    def create(cls) -> CheckpointId:
        return cls(int(time.time() * 1000), time.perf_counter_ns() % 1_000_000 * 1000 + next(_nano) % 1000)

    @classmethod
    def parse(cls, text: str) -> CheckpointId:
        millis, sep, nano = text.partition("-")
        if not sep or not millis.isdigit() or not nano.isdigit():
            raise ValueError(f"checkpoint id {text!r} is not '<millis>-<nanoId>'")
        return cls(int(millis), int(nano))

    def __str__(self) -> str:
        return f"{self.millis}-{self.nano_id}"


@dataclass(frozen=True, order=True)
class Watermark:
    factor: int
    bucket: int
    offset: int

    def covers(self, record_hash: int, offset: int) -> bool:
        return offset < self.offset and record_hash % self.factor == self.bucket


@dataclass(frozen=True, kw_only=True)
class TaskCheckpoint:
    """What a virtual task has processed: per SSPKb the next offset, and the watermarks it honours."""

    task_name: TaskName
    offsets: Mapping[SystemStreamPartition, int]
    watermarks: Mapping[SystemStreamPartition, tuple[Watermark, ...]] = field(default_factory=dict)
    # The state this checkpoint commits (CheckpointV2 only): its id is also sealed into each local store
    # snapshot, and the markers locate each store's backups. Not part of equality: offsets are.
    checkpoint_id: CheckpointId | None = field(default=None, compare=False)
    state_markers: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", dict(self.offsets))
        if self.watermarks:
            object.__setattr__(self, "watermarks", {s: tuple(sorted(w)) for s, w in self.watermarks.items() if w})
        else:
            object.__setattr__(self, "watermarks", {})

    def __hash__(self) -> int:
        return hash((self.task_name, tuple(sorted(self.offsets.items()))))

    @classmethod
    def of_offsets(cls, task_name: TaskName, offsets: dict[SystemStreamPartition, int]) -> TaskCheckpoint:
        """Offsets alone (no watermarks, no state), from a dict it keeps: every virtual task's checkpoint after
        every batch, thousands of them, without the constructor's copies and checks."""
        cp = object.__new__(cls)
        cp.__dict__.update(task_name=task_name, offsets=offsets, watermarks={}, checkpoint_id=None, state_markers={})
        return cp

    def collapsed(self) -> TaskCheckpoint:
        """Without the watermarks that the task's own offset has passed."""
        kept = {s: tuple(w for w in wms if w.offset > self.offsets.get(s, 0)) for s, wms in self.watermarks.items()}
        return TaskCheckpoint(
            task_name=self.task_name,
            offsets=self.offsets,
            watermarks=kept,
            checkpoint_id=self.checkpoint_id,
            state_markers=self.state_markers,
        )


@dataclass(frozen=True)
class CheckpointV1:
    offsets: Mapping[SystemStreamPartition, str]

    version = 1


@dataclass(frozen=True)
class CheckpointV2:
    checkpoint_id: CheckpointId
    input_offsets: Mapping[SystemStreamPartition, str]
    state_checkpoint_markers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    version = 2


def state_of(cp: TaskCheckpoint) -> CheckpointV2 | None:
    """A checkpoint's state part, what a restore needs (None: it commits no state yet)."""
    return CheckpointV2(cp.checkpoint_id, {}, cp.state_markers) if cp.checkpoint_id is not None else None


def to_v1(cp: TaskCheckpoint) -> CheckpointV1:
    return CheckpointV1({s: str(o) for s, o in cp.offsets.items()})


def to_v2(cp: TaskCheckpoint, checkpoint_id: CheckpointId | None = None) -> CheckpointV2:
    """With the task checkpoint's own id and state markers when it has them (a stateful commit)."""
    cid = cp.checkpoint_id or checkpoint_id or CheckpointId.create()
    return CheckpointV2(cid, {s: str(o) for s, o in cp.offsets.items()}, {f: dict(m) for f, m in cp.state_markers.items()})
