"""One store of one virtual task at run time: its folders, its open RocksDB and
KeyValueStore, its metrics, and its backends by factory name."""

from __future__ import annotations

from pathlib import Path

from ..checkpoint.model import CheckpointId
from .backend import StateBackend, StoreContext
from .kv import KeyValueStore
from .metrics import StoreMetrics
from .rocksdb import StoreDirs, open_db


class TaskStore:
    def __init__(self, context: StoreContext, state_dir: Path, backends: dict[str, StateBackend]) -> None:
        self.context = context
        self.dirs = StoreDirs.of(state_dir, context.task, context.name)
        self.backends = backends
        self.metrics = StoreMetrics()
        self.kv: KeyValueStore | None = None
        self.base: CheckpointId | None = None  # the checkpoint the live store equals, while `kv.written` is False

    @property
    def name(self) -> str:
        return self.context.name

    @property
    def backups(self) -> dict[str, StateBackend]:
        return {f: self.backends[f] for f in self.context.config.backup_factories}

    def open(self) -> KeyValueStore:
        if self.kv is None:
            track = any(b.tracks_changes for b in self.backups.values())
            self.kv = KeyValueStore(self.context.descriptor, self.context.task, open_db(self.dirs.live), self.metrics, track)
        return self.kv

    def close(self) -> None:
        if self.kv is not None:
            self.kv.db.close()
            self.kv = None
