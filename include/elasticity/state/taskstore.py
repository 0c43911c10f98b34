"""One store of one virtual task at run time: its folders, its open RocksDB and
KeyValueStore, its metrics, its backends by factory name, and this process's
claim on it (`state.handover`)."""

from __future__ import annotations

from pathlib import Path

from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.state import handover
from elasticity.state.backends import StateBackend, StoreContext
from elasticity.state.kv import KeyValueStore
from elasticity.state.rocksdb import CHECKPOINT_ID_FILE, StoreDirs, open_db, read_checkpoint_id, write_checkpoint_id
from elasticity.state.store_metrics import StoreMetrics


class TaskStore:
    def __init__(self, context: StoreContext, state_dir: Path, backends: dict[str, StateBackend]) -> None:
        self.context = context
        self.dirs = StoreDirs.of(state_dir, context.task, context.name)
        self.backends = backends
        self.metrics = StoreMetrics()
        self.kv: KeyValueStore | None = None
        self.base: CheckpointId | None = None  # the checkpoint the live store equals, while `kv.written` is False
        self._claim: int | None = None

    @property
    def name(self) -> str:
        return self.context.name

    @property
    def root(self) -> Path:
        return self.dirs.root

    @property
    def backups(self) -> dict[str, StateBackend]:
        return {f: self.backends[f] for f in self.context.config.backup_factories}

    def claim(self) -> None:
        """The live folder for this process alone (waits for another holder to let go), until `release`."""
        if self._claim is None:
            self._claim = handover.claim(self.dirs.root)

    def open(self) -> KeyValueStore:
        """Unseals the live folder: from here on it may differ from every checkpoint."""
        self.claim()
        if self.kv is None:
            (self.dirs.live / CHECKPOINT_ID_FILE).unlink(missing_ok=True)
            track = any(b.tracks_changes for b in self.backups.values())
            self.kv = KeyValueStore(
                self.context.descriptor, self.context.task, open_db(self.dirs.live), metrics=self.metrics, track_changes=track
            )
        return self.kv

    def live_is(self, checkpoint_id: CheckpointId) -> bool:
        """Whether the closed live folder was sealed as equal to that checkpoint (by any process)."""
        return self.kv is None and read_checkpoint_id(self.dirs.live) == checkpoint_id

    def release(self) -> None:
        """Close, sealing the live folder with its checkpoint when nothing was written since, and let go
        of it: another process (the next batch may run in another Spark Python worker) opens it at once."""
        if self.kv is not None:
            untouched = not self.kv.written
            self.close()
            if untouched and self.base is not None and self.dirs.live.exists():
                write_checkpoint_id(self.dirs.live, self.base)
        if self._claim is not None:
            handover.unclaim(self._claim)
            self._claim = None

    def close(self) -> None:
        if self.kv is not None:
            self.kv.db.close()
            self.kv = None
