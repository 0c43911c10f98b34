"""From input partitions to the JobModel: SSP groupers, SAMZA-71 schemes,
elasticity expansion into virtual tasks, and placement on containers.

Everything here is a pure function of the config and the partition counts, so
that the driver, a rescale and a test all compute the same model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import reduce
from math import gcd
from typing import Protocol

from elasticity.jobmodel.model import ContainerModel, JobModel, SystemStream, SystemStreamPartition, TaskModel, TaskName
from elasticity.jobmodel.tasknames import all_ssp_task_name, partition_task_name, ssp_task_name


class Grouper(StrEnum):
    GROUP_BY_PARTITION = "GroupByPartition"
    GROUP_BY_SYSTEM_STREAM_PARTITION = "GroupBySystemStreamPartition"
    ALL_SSP_TO_SINGLE_TASK = "AllSspToSingleTask"


GROUPER_NAMES = {
    "org.apache.samza.container.grouper.stream.GroupByPartitionFactory": Grouper.GROUP_BY_PARTITION,
    "GroupByPartitionFactory": Grouper.GROUP_BY_PARTITION,
    "GroupByPartition": Grouper.GROUP_BY_PARTITION,
    "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory": Grouper.GROUP_BY_SYSTEM_STREAM_PARTITION,
    "GroupBySystemStreamPartitionFactory": Grouper.GROUP_BY_SYSTEM_STREAM_PARTITION,
    "GroupBySystemStreamPartition": Grouper.GROUP_BY_SYSTEM_STREAM_PARTITION,
    "org.apache.samza.container.grouper.stream.AllSspToSingleTaskGrouperFactory": Grouper.ALL_SSP_TO_SINGLE_TASK,
    "AllSspToSingleTaskGrouperFactory": Grouper.ALL_SSP_TO_SINGLE_TASK,
    "AllSspToSingleTask": Grouper.ALL_SSP_TO_SINGLE_TASK,
}


class PartitionScheme(StrEnum):
    """SAMZA-71's schemes for GroupByPartition."""

    MAX = "max"
    COGROUP = "cogroup"


class GroupingError(ValueError):
    """Inputs that the configured grouper cannot make tasks of; names the key to change."""


class GroupingConfig(Protocol):
    """What the groupers read of a job's config (JobConfig has it)."""

    @property
    def inputs(self) -> tuple[SystemStream, ...]: ...
    @property
    def grouper(self) -> Grouper: ...
    @property
    def partition_scheme(self) -> PartitionScheme | None: ...
    @property
    def elasticity_factor(self) -> int: ...
    @property
    def container_count(self) -> int: ...
    @property
    def shown_map(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class TaskGroup:
    """A task as Samza's grouper makes it, before elasticity splits it."""

    name: TaskName
    system_stream_partitions: tuple[SystemStreamPartition, ...]
    partition: int | None = None  # the task number of GroupByPartition, which virtual task names reuse


def input_ssps(inputs: tuple[SystemStream, ...], partition_counts: Mapping[SystemStream, int]) -> list[SystemStreamPartition]:
    """All input SSPs, in `task.inputs` order then partition order."""
    ssps: list[SystemStreamPartition] = []
    for ss in inputs:
        if ss not in partition_counts:
            raise GroupingError(f"task.inputs names {ss}, but its partition count is unknown (does the topic exist?)")
        count = partition_counts[ss]
        if count < 1:
            raise GroupingError(f"stream {ss} has {count} partitions; expected at least 1")
        ssps.extend(SystemStreamPartition(ss.system, ss.stream, p) for p in range(count))
    return ssps


def group(config: GroupingConfig, ssps: list[SystemStreamPartition]) -> list[TaskGroup]:
    """SSPs into tasks, as the configured grouper and scheme say."""
    if config.grouper is Grouper.GROUP_BY_SYSTEM_STREAM_PARTITION:
        return [TaskGroup(ssp_task_name(s), (s,)) for s in ssps]
    if config.grouper is Grouper.ALL_SSP_TO_SINGLE_TASK:
        return [TaskGroup(all_ssp_task_name("0"), tuple(ssps))]
    if config.partition_scheme is PartitionScheme.MAX:
        return [TaskGroup(partition_task_name(n), (s,), n) for n, s in enumerate(ssps)]
    if config.partition_scheme is PartitionScheme.COGROUP:
        counts: dict[SystemStream, int] = {}
        for s in ssps:
            counts[s.system_stream] = max(counts.get(s.system_stream, 0), s.partition + 1)
        g = reduce(gcd, counts.values())
        return [TaskGroup(partition_task_name(n), tuple(s for s in ssps if s.partition % g == n), n) for n in range(g)]
    # Samza's GroupByPartition: task n reads partition n of every input.
    partitions = sorted({s.partition for s in ssps})
    return [TaskGroup(partition_task_name(p), tuple(s for s in ssps if s.partition == p), p) for p in partitions]


def expand(groups: list[TaskGroup], factor: int) -> list[list[TaskModel]]:
    """Each task into `factor` virtual tasks, one per key bucket (SEP-32).

    Returned per parent task, so that placement can keep siblings together.
    Changelog partitions number the tasks in this order.
    """
    out: list[list[TaskModel]] = []
    changelog = 0
    for g in groups:
        if factor == 1:
            out.append([TaskModel(g.name, frozenset(g.system_stream_partitions), changelog)])
            changelog += 1
            continue
        if g.partition is None and len(g.system_stream_partitions) != 1:
            raise GroupingError(f"job.elasticity.factor={factor}: task {g.name} cannot be split into virtual tasks")
        siblings = []
        for b in range(factor):
            if g.partition is not None:
                name = partition_task_name(g.partition, b, factor)
            else:
                name = ssp_task_name(g.system_stream_partitions[0], b, factor)
            siblings.append(TaskModel(name, frozenset(s.with_key_bucket(b) for s in g.system_stream_partitions), changelog))
            changelog += 1
        out.append(siblings)
    return out


def place(siblings: list[list[TaskModel]], container_count: int) -> list[ContainerModel]:
    """Tasks onto containers, keeping the virtual tasks of one SSP together (SEP-32's optimisation).

    With no more containers than parent tasks, whole sibling groups go to the
    least loaded container, so each SSP is read by one container. With more
    containers than that, siblings are cut into contiguous runs of near-equal
    size, so an SSP is shared by as few containers as possible.
    """
    total = sum(len(s) for s in siblings)
    if container_count > total:
        raise GroupingError(
            f"job.container.count={container_count}: larger than the task count ({total}); "
            f"expected at most {total}, or raise job.elasticity.factor"
        )
    buckets: list[list[TaskModel]] = [[] for _ in range(container_count)]
    if container_count <= len(siblings):
        for group_ in siblings:
            min(buckets, key=len).extend(group_)
    else:
        flat = [t for group_ in siblings for t in group_]
        base, extra = divmod(total, container_count)
        start = 0
        for i in range(container_count):
            size = base + (1 if i < extra else 0)
            buckets[i] = flat[start : start + size]
            start += size
    return [ContainerModel(str(i), tuple(ts)) for i, ts in enumerate(buckets)]


def build_job_model(config: GroupingConfig, partition_counts: Mapping[SystemStream, int]) -> JobModel:
    groups = group(config, input_ssps(config.inputs, partition_counts))
    containers = place(expand(groups, config.elasticity_factor), config.container_count)
    return JobModel.of(config.shown_map, containers)  # secrets masked: the model is stored and printed
