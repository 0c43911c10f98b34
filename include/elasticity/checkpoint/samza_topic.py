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

State crosses both ways, read as Samza's TransactionalStateTaskRestoreManager
reads it: a CheckpointV2 keeps its id and state markers; in a CheckpointV1 the
entry of a store's changelog SSP (`stores.<s>.changelog`) is that store's
KafkaChangelogSSPOffset (`<checkpointId>:<offset>`), which becomes its Kafka
changelog marker. Export writes both forms, as Samza's TaskInstance does.

Samza reads one offset per partition (`system.stream.partition`): a job at
factor F > 1 is exported as the merge to factor 1 gives it, every partition at
the min over its buckets, so Samza loses nothing. When the buckets disagree the
faster ones' records between the min and their own offset would be processed a
second time: export refuses unless that is allowed (`--allow-reprocessing`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from elasticity.checkpoint.migration import BucketState, migrate_ssp
from elasticity.checkpoint.serde import (
    UnknownCheckpointType,
    checkpoint_key,
    parse_checkpoint_key,
    v1_from_json,
    v1_to_json,
    v2_from_json,
    v2_to_json,
)
from elasticity.checkpoint.state_markers import ChangelogSSPOffset, KafkaChangelogMarker
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV1, CheckpointV2, TaskCheckpoint
from elasticity.config import KAFKA_CHANGELOG_FACTORY
from elasticity.jobmodel.grouping import Grouper
from elasticity.jobmodel.model import NO_KEY_BUCKET, SystemStream, SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import SerdeError
from elasticity.jobmodel.tasknames import parse_task_name

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


def from_samza(
    task: TaskName, cp: CheckpointV1 | CheckpointV2, changelogs: Mapping[SystemStream, str] | None = None
) -> TaskCheckpoint:
    """Our checkpoint (next to process) from Samza's (last processed), with its state; SSPs without an
    offset are left out. `changelogs`: each store's changelog stream -> the store (`stores.<s>.changelog`)."""
    if isinstance(cp, CheckpointV2):
        return TaskCheckpoint(
            task_name=task,
            offsets=_inputs(task, cp.input_offsets),
            checkpoint_id=cp.checkpoint_id if cp.state_checkpoint_markers else None,
            state_markers={f: dict(m) for f, m in cp.state_checkpoint_markers.items()},
        )
    changelogs = changelogs or {}
    inputs, markers, ids = {}, {}, set()
    for ssp, value in cp.offsets.items():
        store = changelogs.get(ssp.system_stream)
        if store is not None:
            entry = ChangelogSSPOffset.parse(value or "")
            markers[store] = KafkaChangelogMarker(ssp, entry.offset).to_json()
            ids.add(entry.checkpoint_id)
        elif ChangelogSSPOffset.looks_like(value):
            raise SerdeError(
                f"checkpoint of {task.name!r}: {ssp} holds a store's changelog offset {value!r} (Samza's "
                f"'<checkpointId>:<offset>'), but no store has {ssp.system_stream} as its changelog; set "
                f"stores.<store>.changelog={ssp.system_stream}"
            )
        else:
            inputs[ssp] = value
    if len(ids) > 1:
        raise SerdeError(f"checkpoint of {task.name!r}: its changelog entries name different checkpoints {sorted(map(str, ids))}")
    return TaskCheckpoint(
        task_name=task,
        offsets=_inputs(task, inputs),
        checkpoint_id=next(iter(ids), None),
        state_markers={KAFKA_CHANGELOG_FACTORY: markers} if markers else {},
    )


def _inputs(task: TaskName, offsets: Mapping[SystemStreamPartition, str | None]) -> dict[SystemStreamPartition, int]:
    try:
        return {s: int(o) + 1 for s, o in offsets.items() if o is not None}
    except ValueError as e:
        raise SerdeError(f"checkpoint of {task.name!r}: input offsets must be integers (Kafka offsets), {e}") from e


def at_factor_1(cps: Iterable[TaskCheckpoint], factor: int, *, allow_reprocessing: bool = False) -> list[TaskCheckpoint]:
    """The checkpoints Samza can read: per partition task, every SSP at the min over its buckets
    (what a merge to factor 1 gives). Refuses what Samza would process twice, unless allowed,
    and state (Samza keeps one store per partition task: `elasticity rescale --factor 1` merges it)."""
    cps = list(cps)
    if factor == 1:
        return cps
    if stateful := sorted(cp.task_name.name for cp in cps if cp.state_markers):
        raise SerdeError(
            f"tasks {stateful[:3]} keep state at factor {factor}; Samza keeps one store per partition task: "
            "run `elasticity rescale --factor 1` (it moves the state with its keys), then export"
        )
    buckets: dict[TaskName, dict[SystemStreamPartition, dict[int, BucketState]]] = defaultdict(lambda: defaultdict(dict))
    for cp in cps:
        parent = parse_task_name(cp.task_name).parent
        for ssp, offset in cp.offsets.items():
            buckets[parent][ssp.with_key_bucket(NO_KEY_BUCKET)][ssp.key_bucket] = BucketState(offset, cp.watermarks.get(ssp, ()))
    out = []
    for parent, ssps in sorted(buckets.items()):
        offsets = {}
        for ssp, states in sorted(ssps.items()):
            (merged,) = migrate_ssp(states, factor, 1).values()
            if merged.watermarks and not allow_reprocessing:
                ahead = ", ".join(f"bucket {w.bucket} at {w.offset}" for w in merged.watermarks)
                raise SerdeError(
                    f"{ssp}: its buckets stand at different offsets ({ahead}, the slowest at {merged.offset}); Samza reads "
                    "one offset per partition and would process the faster buckets' records again: run "
                    "`elasticity run-batch --until-caught-up` (the buckets then meet), or export with --allow-reprocessing"
                )
            offsets[ssp] = merged.offset
        out.append(TaskCheckpoint(task_name=parent, offsets=offsets))
    return out


def to_samza(cp: TaskCheckpoint, version: int, checkpoint_id: CheckpointId) -> str:
    """One checkpoint as Samza's TaskInstance writes it: last-processed offsets; V1 with each Kafka
    changelog marker as a KafkaChangelogSSPOffset entry, V2 with the markers as they are."""
    if cp.watermarks:
        raise SerdeError(
            f"task {cp.task_name.name!r} still skips records a merge found processed (watermarks); Samza's "
            "checkpoints cannot say so and it would process them again: run a batch until caught up, then export"
        )
    cid = cp.checkpoint_id or checkpoint_id
    last: dict[SystemStreamPartition, str] = {s: str(o - 1) for s, o in cp.offsets.items()}
    markers = {f: dict(m) for f, m in cp.state_markers.items()}
    kafka = {store: KafkaChangelogMarker.from_json(m) for store, m in markers.get(KAFKA_CHANGELOG_FACTORY, {}).items()}
    if kafka:
        markers[KAFKA_CHANGELOG_FACTORY] = {store: m.to_json() for store, m in kafka.items()}  # Samza's exact JSON
    if version == 1:
        for m in kafka.values():
            last[m.ssp] = str(ChangelogSSPOffset(cid, m.offset))
        return v1_to_json(CheckpointV1(last))
    return v2_to_json(CheckpointV2(cid, last, markers))


def to_samza_messages(
    cps: Iterable[TaskCheckpoint],
    grouper: Grouper,
    write_versions: tuple[int, ...],
    checkpoint_id: Callable[[], CheckpointId] = CheckpointId.create,
) -> list[tuple[bytes, bytes]]:
    """(key, value) per task and version, last-processed offsets, in Samza's bytes."""
    factory = SAMZA_GROUPER_FACTORIES[grouper]
    out = []
    for cp in sorted(cps, key=lambda c: c.task_name):
        cid = checkpoint_id()
        for version in write_versions:
            out.append((checkpoint_key(cp.task_name, factory, version).encode(), to_samza(cp, version, cid).encode()))
    return out


def describe(found: dict[TaskName, Found]) -> str:
    """One line per task: which version and log offset it resumes from."""
    return "\n".join(
        f"{task.name}: CheckpointV{f.checkpoint.version} at topic offset {f.offset}" for task, f in sorted(found.items())
    )
