"""Samza's Kafka checkpoint topic, so that a job can be handed over from Samza and back.

A checkpoint message is keyed by `{"systemstreampartition-grouper-factory",
"taskName", "type"}` (type `checkpoint` for a CheckpointV1 value, `checkpoint-v2`
for a CheckpointV2). Reading follows Samza's KafkaCheckpointManager: in log
order, a message replaces the task's current one when its version has the same
or a higher priority in `task.checkpoint.read.versions`, or when it was appended
more than `task.live.checkpoint.max.age` after it; versions not read are skipped.

Offsets: Samza checkpoints the *last processed* offset and resumes after it; we
keep the *next to process*. Import adds one, export subtracts one (a partition
where nothing was processed yet exports `-1`, after which Samza resumes at 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from elasticity.checkpoint.serde import (
    UnknownCheckpointType,
    checkpoint_key,
    parse_checkpoint_key,
    v1_from_json,
    v1_to_json,
    v2_from_json,
    v2_to_json,
)
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV1, CheckpointV2, TaskCheckpoint, to_v1, to_v2
from elasticity.jobmodel.grouping import Grouper
from elasticity.jobmodel.model import TaskName
from elasticity.jobmodel.object_mapper import SerdeError

SAMZA_GROUPER_FACTORIES = {
    Grouper.GROUP_BY_PARTITION: "org.apache.samza.container.grouper.stream.GroupByPartitionFactory",
    Grouper.GROUP_BY_SYSTEM_STREAM_PARTITION: "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory",
    Grouper.ALL_SSP_TO_SINGLE_TASK: "org.apache.samza.container.grouper.stream.AllSspToSingleTaskGrouperFactory",
}


@dataclass(frozen=True)
class LogMessage:
    """One message of the checkpoint topic, as the consumer hands it over."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


@dataclass(frozen=True)
class Found:
    """The checkpoint a task resumes from, and where in the log it was."""

    checkpoint: CheckpointV1 | CheckpointV2
    offset: int
    timestamp_ms: int


def last_checkpoints(
    messages: Iterable[LogMessage], grouper: Grouper, read_versions: tuple[int, ...], live_max_age_ms: int
) -> dict[TaskName, Found]:
    """Per task, the checkpoint Samza would resume from (KafkaCheckpointManager.readCheckpoints)."""
    expected = SAMZA_GROUPER_FACTORIES[grouper]
    found: dict[TaskName, Found] = {}
    for m in messages:
        if m.key is None:
            raise SerdeError(f"checkpoint message at offset {m.offset} has no key")
        try:
            task, factory, version = parse_checkpoint_key(m.key.decode(errors="replace"))
        except UnknownCheckpointType:
            continue  # skipped, as Samza does for forward compatibility
        except SerdeError as e:
            raise SerdeError(f"checkpoint topic offset {m.offset}: {e}") from None
        if factory != expected:
            raise SerdeError(
                f"checkpoint at offset {m.offset} was written with grouper {factory!r}, but this job uses {expected!r} "
                "(job.systemstreampartition.grouper.factory); the task names would not match"
            )
        if version not in read_versions:
            continue
        current = found.get(task)
        if current is not None and not (
            read_versions.index(version) <= read_versions.index(current.checkpoint.version)
            or m.timestamp_ms - current.timestamp_ms > live_max_age_ms
        ):
            continue
        text = (m.value or b"").decode()
        try:
            cp = v1_from_json(text) if version == 1 else v2_from_json(text)
        except (ValueError, AttributeError) as e:
            raise SerdeError(f"checkpoint of {task.name!r} at offset {m.offset} is not a CheckpointV{version}: {e}") from e
        found[task] = Found(cp, m.offset, m.timestamp_ms)
    return found


def from_samza(task: TaskName, cp: CheckpointV1 | CheckpointV2) -> TaskCheckpoint:
    """Our checkpoint (next to process) from Samza's (last processed); SSPs without an offset are left out."""
    offsets = cp.offsets if isinstance(cp, CheckpointV1) else cp.input_offsets
    try:
        return TaskCheckpoint(task, {s: int(o) + 1 for s, o in offsets.items() if o is not None})
    except ValueError as e:
        raise SerdeError(f"checkpoint of {task.name!r}: offsets must be integers (Kafka offsets), {e}") from e


def to_samza_messages(
    cps: Iterable[TaskCheckpoint],
    grouper: Grouper,
    write_versions: tuple[int, ...],
    checkpoint_id: Callable[[], CheckpointId] = CheckpointId.create,
) -> list[tuple[bytes, bytes]]:
    """(key, value) per task and version, last-processed offsets, in Samza's exact bytes."""
    factory = SAMZA_GROUPER_FACTORIES[grouper]
    out = []
    for cp in sorted(cps, key=lambda c: c.task_name):
        if cp.watermarks:
            raise SerdeError(
                f"task {cp.task_name.name!r} still skips records a merge found processed (watermarks); Samza's "
                "checkpoints cannot say so and it would process them again: run a batch until caught up, then export"
            )
        last = TaskCheckpoint(cp.task_name, {s: o - 1 for s, o in cp.offsets.items()})
        for version in write_versions:
            value = v1_to_json(to_v1(last)) if version == 1 else v2_to_json(to_v2(last, checkpoint_id()))
            out.append((checkpoint_key(cp.task_name, factory, version).encode(), value.encode()))
    return out


def describe(found: dict[TaskName, Found]) -> str:
    """One line per task: which version and log offset it resumes from."""
    return "\n".join(
        f"{task.name}: CheckpointV{f.checkpoint.version} at topic offset {f.offset}" for task, f in sorted(found.items())
    )
