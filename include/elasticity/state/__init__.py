"""Stateful virtual tasks: key-value stores, their backups and their restore
(Samza's storage layer, after CheckpointV2's design; Quix Streams' state/ layout).

Modules: store_config (the `stores.*` keys per store, for the app's
`elasticity.api.StoreDescriptor`s) - kv (the KeyValueStore operators use) -
rocksdb (the local DB and its checkpoints) - backends/ (backup and restore:
changelog, blobstore with its blob manager and snapshot index) - taskstore,
restore, commit_manager, container, worker (the managers) - rescale, bucketscan
(state moving with its keys) - table (side-input tables) - store_metrics.

How the engine calls it, per container (a Spark Python worker owning some
virtual tasks) and per batch:

    descriptors = list(app.stores.values())                       # the app declares StoreDescriptor(...)
    storage = StorageConfig.of(job_config, descriptors)
    csm = ContainerStorageManager(storage, descriptors, container_tasks, changelog_partitions=len(job_model.tasks()))
    csm.restore({t: to_v2(task_checkpoints[t]) for t in tasks})  # cheap when nothing changed since the last commit
    ... for each record of task t: operators get csm.store(t, "counts") as context.store("counts") ...
    snapshots = csm.snapshot(checkpoint_id)                       # synchronous, processing paused
    markers = csm.upload(snapshots)                               # may overlap the next batch (commit thread)
    # the driver writes each task's CheckpointV2 with checkpoint_id and markers[t]
    #   (TaskCheckpoint(..., checkpoint_id=checkpoint_id, state_markers=markers[t]))
    csm.cleanup({t: written_v2[t] for t in tasks})               # only after the checkpoints are written

Every store's snapshot carries the batch's checkpoint id; a restore trusts a
local snapshot only when that id equals the committed checkpoint's, so a
crash at any step yields exactly the last committed state. `upload` must run
where the snapshot folders are (the executor's disk); call `restore` again
before retrying a batch whose commit failed. Metrics: `csm.metrics()`.
"""

from elasticity.state.commit_manager import Markers, TaskSnapshot
from elasticity.state.container import ContainerStorageManager
from elasticity.state.kv import KeyValueStore, WrongBucketError
from elasticity.state.store_config import StorageConfig, StoreConfig
from elasticity.state.store_metrics import StoreMetrics

__all__ = [
    "ContainerStorageManager",
    "KeyValueStore",
    "Markers",
    "StorageConfig",
    "StoreConfig",
    "StoreMetrics",
    "TaskSnapshot",
    "WrongBucketError",
]
