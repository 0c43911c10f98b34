"""The commit of one virtual task's stores (Samza's TaskStorageCommitManager).

snapshot (synchronous with processing): flush each store and take a local
RocksDB checkpoint, then each backup backend's synchronous part (the changelog
flush). upload (on the commit pool, overlapping the next batch): every backup
backend makes the snapshot durable and returns its marker. cleanup (only after
the checkpoint with those markers is written): backends drop what it no longer
needs, and local checkpoints older than the committed one are deleted (newer
ones belong to commits that may still come).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from elasticity import faults
from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.jobmodel.model import TaskName
from elasticity.state.rocksdb import create_checkpoint, disk_usage
from elasticity.state.taskstore import TaskStore

Markers = dict[str, dict[str, str]]
"""CheckpointV2's state-checkpoint-markers: backend factory -> store -> marker."""


@dataclass(frozen=True)
class StoreSnapshot:
    store: str
    folder: str
    pending: tuple[tuple[str, str | None], ...]  # (factory, marker known at snapshot time)


@dataclass(frozen=True)
class TaskSnapshot:
    """What the synchronous snapshot leaves for the upload; picklable, to cross to the driver."""

    task_name: TaskName
    checkpoint_id: CheckpointId
    stores: tuple[StoreSnapshot, ...]


class TaskStorageCommitManager:
    def __init__(self, task: TaskName, stores: dict[str, TaskStore]) -> None:
        self.task = task
        self.stores = stores

    def snapshot(self, checkpoint_id: CheckpointId) -> TaskSnapshot:
        out = []
        for name, ts in self.stores.items():
            start = time.perf_counter_ns()
            kv = ts.open()
            folder = create_checkpoint(kv.db, ts.dirs.checkpoint(checkpoint_id), checkpoint_id)
            faults.point("state.snapshot.checkpoint_created")
            pending = tuple((f, b.snapshot(kv, checkpoint_id)) for f, b in ts.backups.items())
            ts.base, kv.written = checkpoint_id, False
            ts.metrics.snapshot_ns += time.perf_counter_ns() - start
            ts.metrics.disk_usage_bytes = disk_usage(ts.dirs.live)
            out.append(StoreSnapshot(name, str(folder), pending))
        faults.point("state.snapshot.done")
        return TaskSnapshot(self.task, checkpoint_id, tuple(out))

    def submit_upload(self, snapshot: TaskSnapshot, pool: Executor) -> Callable[[], Markers]:
        """Start every (store, backend) upload on the pool; the returned call waits and gives the markers."""
        jobs = []
        for s in snapshot.stores:
            ts = self.stores[s.store]
            for factory, pending in s.pending:
                jobs.append(
                    (
                        factory,
                        s.store,
                        pool.submit(self._upload, ts, factory, snapshot.checkpoint_id, folder=Path(s.folder), pending=pending),
                    )
                )

        def markers() -> Markers:
            out: Markers = {}
            for factory, store, future in jobs:
                out.setdefault(factory, {})[store] = future.result()
            for s in snapshot.stores:
                ts = self.stores[s.store]
                ts.metrics.bytes_uploaded = sum(ts.backends[f].bytes_uploaded for f, _ in s.pending)
            faults.point("state.upload.done")
            return out

        return markers

    @staticmethod
    def _upload(ts: TaskStore, factory: str, checkpoint_id: CheckpointId, *, folder: Path, pending: str | None) -> str:
        start = time.perf_counter_ns()
        backend = ts.backends[factory]
        marker = backend.upload(checkpoint_id, folder, pending)
        ts.metrics.upload_ns += time.perf_counter_ns() - start
        return marker

    def cleanup(self, checkpoint_id: CheckpointId, markers: Markers) -> None:
        """After the checkpoint is written: never before, or a crash could leave it without its snapshot."""
        for name, ts in self.stores.items():
            for factory, backend in ts.backups.items():
                marker = markers.get(factory, {}).get(name)
                if marker is not None:
                    backend.cleanup(marker)
            for folder in ts.dirs.checkpoints():
                if _id_of(folder) < checkpoint_id:
                    shutil.rmtree(folder, ignore_errors=True)
                    faults.point("state.cleanup.local_deleted")


def _id_of(folder: Path) -> CheckpointId:
    try:
        return CheckpointId.parse(folder.name.removeprefix("checkpoint-"))
    except ValueError:
        return CheckpointId(0, 0)  # not ours: always older
