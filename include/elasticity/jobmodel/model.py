"""Samza's job model as small immutable value types.

Collections are tuples so that every model is hashable, picklable (Spark ships
them to executors) and cannot be changed behind a reader's back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

NO_KEY_BUCKET = -1
"""keyBucket of an SSP that is read whole (elasticity off), as in Samza."""

_SYSTEM_RE = re.compile(r"^[A-Za-z0-9_\-]+$")


@lru_cache(maxsize=4096)
def _check_names(system: str, stream: str) -> None:
    """Validated once per name pair: SSPs are built by the hundred thousand in a rescale."""
    if not _SYSTEM_RE.match(system):
        raise ValueError(f"system name {system!r} must match {_SYSTEM_RE.pattern} (no dots)")
    if not stream:
        raise ValueError("stream name must not be empty")


@dataclass(frozen=True, order=True)
class SystemStream:
    system: str
    stream: str

    def __post_init__(self) -> None:
        _check_names(self.system, self.stream)

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}"

    @classmethod
    def parse(cls, text: str) -> SystemStream:
        """`system.stream` as in `task.inputs`; the stream may itself contain dots."""
        system, sep, stream = text.strip().partition(".")
        if not sep:
            raise ValueError(f"{text!r} is not of the form system.stream")
        return cls(system, stream)


@dataclass(frozen=True, order=True)
class SystemStreamPartition:
    """An input partition, or with `key_bucket` >= 0 one key bucket of it (an SSPKb)."""

    system: str
    stream: str
    partition: int
    key_bucket: int = NO_KEY_BUCKET

    def __post_init__(self) -> None:
        _check_names(self.system, self.stream)
        if self.partition < 0:
            raise ValueError(f"partition must be >= 0, got {self.partition}")
        if self.key_bucket < NO_KEY_BUCKET:
            raise ValueError(f"keyBucket must be >= -1, got {self.key_bucket}")

    @property
    def system_stream(self) -> SystemStream:
        return SystemStream(self.system, self.stream)

    @property
    def has_key_bucket(self) -> bool:
        return self.key_bucket != NO_KEY_BUCKET

    def with_key_bucket(self, key_bucket: int) -> SystemStreamPartition:
        return _ssp(self.system, self.stream, self.partition, key_bucket)

    def without_key_bucket(self) -> SystemStreamPartition:
        """Kept on the object (as its hash): every batch asks each SSPKb of every checkpoint for its partition."""
        base = self.__dict__.get("_base")
        if base is None:
            base = self if self.key_bucket == NO_KEY_BUCKET else self.with_key_bucket(NO_KEY_BUCKET)
            object.__setattr__(self, "_base", base)
        return base

    def __hash__(self) -> int:
        """Computed once per object: SSPs key the dicts of every batch's plan, routes and checkpoints, thousands a
        batch at thousands of virtual tasks. Kept out of pickles (`__reduce__`): string hashes differ per process."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.system, self.stream, self.partition, self.key_bucket))
            object.__setattr__(self, "_hash", h)
        return h

    def __reduce__(self) -> tuple[type, tuple[str, str, int, int]]:
        return SystemStreamPartition, (self.system, self.stream, self.partition, self.key_bucket)

    def __str__(self) -> str:
        """Samza's toString: the bucket appears only when there is one."""
        bucket = f", {self.key_bucket}" if self.has_key_bucket else ""
        return f"SystemStreamPartition [{self.system}, {self.stream}, {self.partition}{bucket}]"


@lru_cache(maxsize=1 << 16)
def _ssp(system: str, stream: str, partition: int, key_bucket: int) -> SystemStreamPartition:
    """An SSP of known names with another key bucket, built once: a rescale at thousands of virtual tasks asks
    for each one several times."""
    return SystemStreamPartition(system, stream, partition, key_bucket)


@dataclass(frozen=True, order=True)
class TaskName:
    name: str

    def __str__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return hash(self.name)  # the name's own, which Python keeps with the string: no tuple per lookup


class TaskMode(StrEnum):
    ACTIVE = "Active"
    STANDBY = "Standby"


@dataclass(frozen=True)
class TaskModel:
    task_name: TaskName
    system_stream_partitions: frozenset[SystemStreamPartition]
    changelog_partition: int
    task_mode: TaskMode = TaskMode.ACTIVE

    def __post_init__(self) -> None:
        object.__setattr__(self, "system_stream_partitions", frozenset(self.system_stream_partitions))


@dataclass(frozen=True)
class ContainerModel:
    processor_id: str
    tasks: tuple[TaskModel, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))


@dataclass(frozen=True)
class JobModel:
    config: tuple[tuple[str, str], ...]
    containers: tuple[ContainerModel, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", tuple(sorted(dict(self.config).items())))
        object.__setattr__(self, "containers", tuple(self.containers))
        names = [t.task_name for t in self.tasks()]
        if len(names) != len(set(names)):
            raise ValueError("a task name appears in more than one container")

    @classmethod
    def of(cls, config: Mapping[str, str], containers: Iterable[ContainerModel]) -> JobModel:
        return cls(tuple(config.items()), tuple(containers))

    def tasks(self) -> tuple[TaskModel, ...]:
        return tuple(t for c in self.containers for t in c.tasks)

    def task(self, name: TaskName | str) -> TaskModel:
        key = name if isinstance(name, TaskName) else TaskName(name)
        for t in self.tasks():
            if t.task_name == key:
                return t
        raise KeyError(f"no task {key.name!r} in the job model")

    def container_of(self, name: TaskName) -> ContainerModel:
        for c in self.containers:
            if any(t.task_name == name for t in c.tasks):
                return c
        raise KeyError(f"no task {name.name!r} in the job model")
