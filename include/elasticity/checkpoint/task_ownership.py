"""A checkpoint fits the job model it is written under: it names one of the model's tasks, holds an offset for
every input partition that task reads and no other, and keeps a Kafka changelog in the task's own changelog
partition. Checked when checkpoints come from elsewhere (an import from Samza, a hand-written write), where
nothing else guarantees it."""

from __future__ import annotations

from elasticity.checkpoint.state_markers import KafkaChangelogMarker
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import KAFKA_CHANGELOG_FACTORY, ConfigError
from elasticity.jobmodel.model import JobModel


def check_changelog_partition(model: JobModel, cp: TaskCheckpoint, source: str) -> None:
    """A Kafka changelog marker names the partition the task's state was written to; this job writes and
    restores the task's state in its own changelog partition, so the two must be the same."""
    task = model.task(cp.task_name)
    for store, text in cp.state_markers.get(KAFKA_CHANGELOG_FACTORY, {}).items():
        marker = KafkaChangelogMarker.from_json(text)
        if marker.ssp.partition != task.changelog_partition:
            raise ConfigError(
                f"{source}: task {cp.task_name.name!r} kept store {store!r} in changelog partition {marker.ssp.partition}, "
                f"but this job gives the task changelog partition {task.changelog_partition}; the job model must match "
                "the Samza job's (job.systemstreampartition.grouper.factory, task.inputs and their partitions)"
            )


def check_owned(model: JobModel, cp: TaskCheckpoint, where: str) -> None:
    """A checkpoint names a task of the model, and only SSPs that task reads."""
    try:
        owned = model.task(cp.task_name).system_stream_partitions
    except KeyError:
        raise ConfigError(f"task {cp.task_name.name!r} is not in {where}") from None
    foreign = set(cp.offsets) - owned
    if foreign:
        raise ConfigError(f"task {cp.task_name.name!r} does not read {sorted(map(str, foreign))}")
    if missing := owned - set(cp.offsets):
        raise ConfigError(
            f"task {cp.task_name.name!r} has no offset for {sorted(map(str, missing))}: a checkpoint holds every input "
            "partition its task reads (one left out would be read from nowhere)"
        )
