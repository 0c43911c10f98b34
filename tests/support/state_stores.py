"""Real stores (rocksdict, blob store on a local folder) for the tasks of a job model:
write the entries each task holds, commit them as the engine does, read a
generation's committed state back. Used by the state-move tests."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict

from elasticity.api import StoreDescriptor
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint, state_of
from elasticity.config import BLOB_STORE_FACTORY, JobConfig, validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import JobModel, SystemStream, TaskModel, TaskName
from elasticity.state import ContainerStorageManager, StorageConfig
from elasticity.state.backends.blob_manager import BlobStoreManager
from elasticity.state.backends.snapshot_index import SnapshotIndex

COUNTS = StoreDescriptor("counts", "string", "json")
ORDERS = SystemStream("kafka", "orders")


def job_config(tmp: Path, factor: int, descriptors=(COUNTS,), **props: str) -> JobConfig:
    backups = {f"stores.{d.name}.backup.factories": "blobstore" for d in descriptors}
    return validate(
        {
            "job.name": "move",
            "task.inputs": str(ORDERS),
            "job.elasticity.factor": str(factor),
            "task.checkpoint.read.versions": "2,1",
            "job.state.dir": str(tmp / "state"),
            "blob.store.uri": str(tmp / "blobs"),
            **backups,
            **props,
        }
    )


def storage(config: JobConfig, descriptors=(COUNTS,)) -> StorageConfig:
    return StorageConfig.of(config, list(descriptors))


def model(config: JobConfig, partitions: int) -> JobModel:
    return build_job_model(config, {s: partitions for s in config.inputs})


def manager(
    st: StorageConfig, m: JobModel, descriptors=(COUNTS,), fresh: bool = True, tasks: list[TaskModel] | None = None
) -> ContainerStorageManager:
    """Over every task of the model (or `tasks` of it); `fresh`: in a new state folder (nothing local to reuse: a restore downloads)."""
    if fresh:
        st = replace(st, state_dir=st.state_dir.parent / f"read-{uuid.uuid4().hex[:8]}")
    return ContainerStorageManager(st, list(descriptors), m.tasks() if tasks is None else tasks, len(m.tasks()))


def commit(
    st: StorageConfig, m: JobModel, entries: dict[TaskName, dict[str, dict[Any, Any]]], descriptors=(COUNTS,)
) -> dict[TaskName, TaskCheckpoint]:
    """Each task's stores hold `entries[task][store]`, committed as one checkpoint per task (no input offsets)."""
    csm = manager(st, m, descriptors)
    try:
        csm.restore({})
        for task, stores in entries.items():
            for name, values in stores.items():
                csm.store(task, name).put_all(values)
        cp_id = CheckpointId.create()
        markers = csm.upload(csm.snapshot(cp_id))
        return {t: TaskCheckpoint(task_name=t, offsets={}, checkpoint_id=cp_id, state_markers=markers[t]) for t in csm.tasks}
    finally:
        csm.close()


def read(
    st: StorageConfig,
    m: JobModel,
    cps: dict[TaskName, TaskCheckpoint],
    descriptors=(COUNTS,),
    tasks: list[TaskModel] | None = None,
) -> dict[TaskName, dict[str, dict]]:
    """Every task's (or `tasks`') committed stores, restored from the checkpoints' markers into a fresh folder."""
    csm = manager(st, m, descriptors, tasks=tasks)
    try:
        csm.restore({t: state_of(cp) for t, cp in cps.items()})
        return {t: {d.name: dict(csm.store(t, d.name).all()) for d in descriptors} for t in csm.tasks}
    finally:
        csm.close()


class SnapshotReader:
    """`read` for a test that checks the committed state after every step: restoring every task's
    RocksDB each time is most of such a test's time. A task is restored the first time its
    blob-store markers are seen; later its snapshot is only checked to be still whole (the index
    and every file it lists are in the blob store), since a snapshot is never rewritten, only deleted."""

    def __init__(self, st: StorageConfig, descriptors=(COUNTS,)) -> None:
        self.st, self.descriptors = st, descriptors
        self.blobs = BlobStoreManager(st.blob_uri)
        self.known: dict[tuple[TaskName, str | None], dict[str, dict]] = {}

    def read(self, m: JobModel, cps: dict[TaskName, TaskCheckpoint]) -> dict[TaskName, dict[str, dict]]:
        keys = {t.task_name: (t.task_name, _markers(cps.get(t.task_name))) for t in m.tasks()}
        new = [t for t in m.tasks() if keys[t.task_name] not in self.known]
        for t in m.tasks():
            if keys[t.task_name] in self.known and t.task_name in cps:
                self._assert_whole(t.task_name, cps[t.task_name])
        if new:
            for task, stores in read(self.st, m, cps, self.descriptors, tasks=new).items():
                self.known[keys[task]] = stores
        return {t: self.known[k] for t, k in keys.items()}

    def _assert_whole(self, task: TaskName, cp: TaskCheckpoint) -> None:
        for store, marker in cp.state_markers.get(BLOB_STORE_FACTORY, {}).items():
            index = SnapshotIndex.from_json(self.blobs.get_bytes(marker).decode())
            gone = sorted(b for b in index.blob_ids() if not self.blobs.exists(b))
            assert not gone, f"store {store!r} of task {task.name!r}: snapshot {marker} lost {gone}"


def _markers(cp: TaskCheckpoint | None) -> str | None:
    """What a restore reads: None without a stateful checkpoint (empty stores)."""
    return None if cp is None or cp.checkpoint_id is None else json.dumps(cp.state_markers, sort_keys=True)


def snapshot(folder, entries: dict[bytes, bytes]) -> str:
    """A RocksDB folder holding `entries` as raw bytes, as a bucket scan reads an old snapshot."""
    db = Rdict(str(folder), Options(raw_mode=True))
    for k, v in entries.items():
        db[k] = v
    db.close()
    return str(folder)


def read_sst(tmp_path, path: str) -> dict[bytes, bytes]:
    """The entries of an SST file a bucket scan wrote, ingested into a scratch RocksDB."""
    db = Rdict(str(tmp_path / f"read-{os.path.basename(path)}"), Options(raw_mode=True))
    db.ingest_external_file([path])
    out = dict(db.items())
    db.close()
    return out
