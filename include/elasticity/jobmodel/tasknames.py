"""Task names, and reading them back into their parts.

Without elasticity the names are Samza's (`Partition 3`,
`SystemStreamPartition [kafka, orders, 3]`, `Task-0`). With factor F > 1 a
virtual task carries its bucket and the factor (SEP-32): `Partition_3-1-4`,
`SystemStreamPartition [kafka, orders, 3]-1-4`, so a checkpoint written under one
factor can never be mistaken for one written under another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from elasticity.jobmodel.model import NO_KEY_BUCKET, SystemStream, SystemStreamPartition, TaskName


class TaskKind(StrEnum):
    PARTITION = "partition"
    SYSTEM_STREAM_PARTITION = "system-stream-partition"
    ALL_SSP = "all-ssp"


@dataclass(frozen=True, kw_only=True)
class ParsedTaskName:
    kind: TaskKind
    partition: int | None = None  # PARTITION
    system_stream: SystemStream | None = None  # SYSTEM_STREAM_PARTITION
    ssp_partition: int | None = None
    processor_id: str | None = None  # ALL_SSP
    key_bucket: int = NO_KEY_BUCKET
    factor: int = 1

    @property
    def parent(self) -> TaskName:
        """The name this task has with elasticity off."""
        if self.kind is TaskKind.PARTITION:
            return partition_task_name(self.partition or 0)
        if self.kind is TaskKind.SYSTEM_STREAM_PARTITION:
            assert self.system_stream is not None and self.ssp_partition is not None
            ss = self.system_stream
            return ssp_task_name(SystemStreamPartition(ss.system, ss.stream, self.ssp_partition))
        return all_ssp_task_name(self.processor_id or "0")


def _suffix(key_bucket: int, factor: int) -> str:
    if factor == 1 and key_bucket == NO_KEY_BUCKET:
        return ""
    if factor < 2 or not 0 <= key_bucket < factor:
        raise ValueError(f"key bucket {key_bucket} with factor {factor}: need 0 <= bucket < factor and factor >= 2")
    return f"-{key_bucket}-{factor}"


def partition_task_name(partition: int, key_bucket: int = NO_KEY_BUCKET, factor: int = 1) -> TaskName:
    if factor == 1:
        _suffix(key_bucket, factor)
        return TaskName(f"Partition {partition}")
    return TaskName(f"Partition_{partition}{_suffix(key_bucket, factor)}")


def ssp_task_name(ssp: SystemStreamPartition, key_bucket: int = NO_KEY_BUCKET, factor: int = 1) -> TaskName:
    return TaskName(f"SystemStreamPartition [{ssp.system}, {ssp.stream}, {ssp.partition}]{_suffix(key_bucket, factor)}")


def all_ssp_task_name(processor_id: str) -> TaskName:
    return TaskName(f"Task-{processor_id}")


_PARTITION = re.compile(r"^Partition (?P<p>\d+)$")
_VPARTITION = re.compile(r"^Partition_(?P<p>\d+)-(?P<b>\d+)-(?P<f>\d+)$")
_SSP = re.compile(r"^SystemStreamPartition \[(?P<sys>[^,\]]+), (?P<stream>[^\]]+), (?P<p>\d+)\](?:-(?P<b>\d+)-(?P<f>\d+))?$")
_ALL = re.compile(r"^Task-(?P<id>.+)$")


def parse_task_name(name: TaskName | str) -> ParsedTaskName:
    text = name.name if isinstance(name, TaskName) else name
    if m := _PARTITION.match(text):
        return ParsedTaskName(kind=TaskKind.PARTITION, partition=int(m["p"]))
    if m := _VPARTITION.match(text):
        return _checked(
            ParsedTaskName(kind=TaskKind.PARTITION, partition=int(m["p"]), key_bucket=int(m["b"]), factor=int(m["f"]))
        )
    if m := _SSP.match(text):
        bucket, factor = (int(m["b"]), int(m["f"])) if m["b"] is not None else (NO_KEY_BUCKET, 1)
        return _checked(
            ParsedTaskName(
                kind=TaskKind.SYSTEM_STREAM_PARTITION,
                system_stream=SystemStream(m["sys"], m["stream"]),
                ssp_partition=int(m["p"]),
                key_bucket=bucket,
                factor=factor,
            )
        )
    if m := _ALL.match(text):
        return ParsedTaskName(kind=TaskKind.ALL_SSP, processor_id=m["id"])
    raise ValueError(
        f"unrecognised task name {text!r}: expected 'Partition <n>', 'Partition_<n>-<bucket>-<factor>', "
        "'SystemStreamPartition [<system>, <stream>, <n>][-<bucket>-<factor>]' or 'Task-<id>'"
    )


def _checked(p: ParsedTaskName) -> ParsedTaskName:
    _suffix(p.key_bucket, p.factor)
    return p
