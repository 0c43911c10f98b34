"""What a TestRun takes and gives: input records as a producer sends them, and one batch's result (its outputs,
dead letters, per-task summaries and stores) as the sinks and the driver hold it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elasticity.api.stream import KV
from elasticity.batch.coordinator.outcome import TaskSummary


@dataclass(frozen=True)
class Record:
    """An input record as a producer sends it: `key` and `value` are encoded with the system's serdes unless
    they are bytes already (bytes a serde cannot read take the engine's dead-letter path). Without a
    `partition`, Kafka's default partitioner places it (murmur2 of the key; round robin for a null key).
    `timestamp` is the Kafka timestamp in ms, the event time of a window without `event_time`."""

    key: Any
    value: Any
    partition: int | None = None
    timestamp: int = 0


@dataclass(frozen=True, kw_only=True)
class Emitted:
    """An output record with where it came from: its virtual task and the input record (for a closed window,
    the last record folded into it)."""

    key: Any
    value: Any
    task: str
    stream: str
    partition: int
    offset: int


@dataclass(frozen=True, kw_only=True)
class DeadLetter:
    """A row of the dead-letter sink: the record's bytes as read, and why (the engine's reason)."""

    key: bytes | None
    value: bytes | None
    error: str
    task: str
    stream: str
    partition: int
    offset: int


@dataclass(frozen=True, kw_only=True)
class TaskRun:
    """A virtual task's summary row of the batch (the driver's `TaskSummary`, its counts and error)."""

    task: str
    records: int
    processed: int
    dead_lettered: int
    outputs: int
    error: str | None


@dataclass(frozen=True, kw_only=True)
class Result:
    """One micro-batch: its outputs (decoded, per output in the order its sink holds them: each virtual task's
    in input order), its dead letters, per task its summary, and every store's state after it (all tasks'
    committed snapshots merged)."""

    batch_id: int
    outputs: dict[str, list[KV]]
    emitted: dict[str, list[Emitted]]
    dead_letters: list[DeadLetter]
    stores: dict[str, dict[Any, Any]]
    by_task: dict[str, TaskRun]


def task_run(r: TaskSummary) -> TaskRun:
    return TaskRun(
        task=r.task_name,
        records=r.records,
        processed=r.processed,
        dead_lettered=r.dead_lettered,
        outputs=r.outputs,
        error=r.error,
    )
