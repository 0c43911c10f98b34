"""Real stores (rocksdict, blob store on a local folder) for the tasks of a job model:
write the entries each task holds, commit them as the engine does, read a
generation's committed state back. Used by the state-move tests."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from elasticity.api import StoreDescriptor
from elasticity.checkpoint.model import CheckpointId, TaskCheckpoint, state_of
from elasticity.config import JobConfig, validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import JobModel, SystemStream, TaskName
from elasticity.state import ContainerStorageManager, StorageConfig

COUNTS = StoreDescriptor("counts", "string", "json")
ORDERS = SystemStream("kafka", "orders")


def job_config(tmp: Path, factor: int, descriptors=(COUNTS,), **props: str) -> JobConfig:
    backups = {f"stores.{d.name}.backup.factories": "blobstore" for d in descriptors}
    return validate({
        "job.name": "move", "task.inputs": str(ORDERS), "job.elasticity.factor": str(factor), "task.checkpoint.read.versions": "2,1",
        "job.state.dir": str(tmp / "state"), "blob.store.uri": str(tmp / "blobs"), **backups, **props,
    })


def storage(config: JobConfig, descriptors=(COUNTS,)) -> StorageConfig:
    return StorageConfig.of(config, list(descriptors))


def model(config: JobConfig, partitions: int) -> JobModel:
    return build_job_model(config, {s: partitions for s in config.inputs})


def manager(st: StorageConfig, m: JobModel, descriptors=(COUNTS,), fresh: bool = True) -> ContainerStorageManager:
    """Over every task of the model; `fresh`: in a new state folder (nothing local to reuse: a restore downloads)."""
    if fresh:
        st = replace(st, state_dir=st.state_dir.parent / f"read-{uuid.uuid4().hex[:8]}")
    return ContainerStorageManager(st, list(descriptors), m.tasks(), len(m.tasks()))


def commit(st: StorageConfig, m: JobModel, entries: dict[TaskName, dict[str, dict[Any, Any]]],
           descriptors=(COUNTS,)) -> dict[TaskName, TaskCheckpoint]:
    """Each task's stores hold `entries[task][store]`, committed as one checkpoint per task (no input offsets)."""
    csm = manager(st, m, descriptors)
    try:
        csm.restore({})
        for task, stores in entries.items():
            for name, values in stores.items():
                csm.store(task, name).put_all(values)
        cp_id = CheckpointId.create()
        markers = csm.upload(csm.snapshot(cp_id))
        return {t: TaskCheckpoint(t, {}, checkpoint_id=cp_id, state_markers=markers[t]) for t in csm.tasks}
    finally:
        csm.close()


def read(st: StorageConfig, m: JobModel, cps: dict[TaskName, TaskCheckpoint], descriptors=(COUNTS,)) -> dict[TaskName, dict[str, dict]]:
    """Every task's committed stores, restored from the checkpoints' markers into a fresh folder."""
    csm = manager(st, m, descriptors)
    try:
        csm.restore({t: state_of(cp) for t, cp in cps.items()})
        return {t: {d.name: dict(csm.store(t, d.name).all()) for d in descriptors} for t in csm.tasks}
    finally:
        csm.close()
