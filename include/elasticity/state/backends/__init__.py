"""A state backend (Samza's StateBackendFactory with its backup and restore
managers), for one store of one virtual task.

The commit calls `snapshot` synchronously with processing, `upload` on the
commit pool, and `cleanup` only after the checkpoint carrying the marker is
written. A restore builds a RocksDB folder from a marker; `init` then makes the
restored state the base of the next snapshot.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import ClassVar

from elasticity.api.descriptors import StoreDescriptor
from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.jobmodel.model import TaskName
from elasticity.jobmodel.tasknames import parse_task_name
from elasticity.state.kv import KeyValueStore, bucket_of
from elasticity.state.store_config import StoreConfig


@dataclass(frozen=True, kw_only=True)
class StoreContext:
    """Everything a backend knows about the (virtual task, store) it serves."""

    job_name: str
    job_id: str
    task: TaskName
    changelog_partition: int
    config: StoreConfig
    descriptor: StoreDescriptor
    transactional: bool = True

    @property
    def name(self) -> str:
        return self.config.name

    @cached_property
    def _bucket(self) -> tuple[int, int]:
        parsed = parse_task_name(self.task)
        return parsed.key_bucket, parsed.factor

    def owns(self, raw_key: bytes) -> bool:
        bucket, factor = self._bucket
        return factor <= 1 or bucket_of(self.descriptor, raw_key, factor) == bucket


class StateBackend(ABC):
    factory: ClassVar[str]  # Samza's factory class name: the key of its markers in CheckpointV2
    tracks_changes: ClassVar[bool] = False  # whether the store must remember the keys written since the last snapshot
    bytes_uploaded = 0  # by the last upload

    def __init__(self, context: StoreContext) -> None:
        self.context = context

    def init(self, marker: str | None, store: KeyValueStore) -> None:  # noqa: B027 (optional hook)
        """The store now holds the state of `marker` (None: no committed state)."""

    def snapshot(self, store: KeyValueStore, checkpoint_id: CheckpointId) -> str | None:
        """Synchronous part of a commit; the marker when it is known already (the upload must then write that)."""
        return None

    @abstractmethod
    def upload(self, checkpoint_id: CheckpointId, folder: Path, pending: str | None) -> str:
        """Make the snapshot in `folder` durable; returns the marker."""

    def cleanup(self, marker: str) -> None:  # noqa: B027 (optional hook)
        """After the checkpoint with `marker` was written: remove what it no longer needs."""

    @abstractmethod
    def restore(self, marker: str | None, folder: Path) -> str | None:
        """Build a RocksDB at `folder` from `marker` (None: from the start of what exists); returns the marker restored."""
