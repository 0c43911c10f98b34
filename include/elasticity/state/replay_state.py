"""The stores of a replay: cleared, then rebuilt by the replayed records, as Kafka Streams' application reset
tool deletes an application's changelogs and local state before it reprocesses.

Clearing writes, for every (virtual task, store), an empty state under one new checkpoint id R: with the blob
store an empty snapshot, with a Kafka changelog a tombstone for every key of the task the changelog partition
held (so a restore from either backend gives the empty store), and with no backup nothing (the new checkpoint
id alone makes the task's local store start empty, as a transactional restore does). The old snapshots are
never modified; the uploads are journalled as a rescale's state move is (`state.rescale`), so what a crashed
or superseded replay uploaded is removed by the next attempt.

Refused, naming the store and why, when the state could not be rebuilt from the retained input: records the
replay needs were removed by the input's retention, the job joins tables fed by side inputs (a replay joins
against their current contents, not those the records first met), or the state is not transactional (each
executor reuses its local store as it is, which a replay cannot reach).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from elasticity.api.descriptors import StoreDescriptor
from elasticity.checkpoint.replay import PartitionStart
from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.config import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY
from elasticity.jobmodel.model import JobModel, SystemStreamPartition, TaskModel, TaskName
from elasticity.state.backends.blob_manager import BlobStoreManager
from elasticity.state.backends.blobstore import BlobStoreStateBackend
from elasticity.state.commit_manager import Markers
from elasticity.state.rescale import _changelog_image, _context
from elasticity.state.rocksdb import create_checkpoint, open_db
from elasticity.state.state_move import StateMove, Transfer, write_journal
from elasticity.state.store_config import StorageConfig, StoreConfig

log = logging.getLogger(__name__)


def refusals(
    storage: StorageConfig,
    descriptors: Sequence[StoreDescriptor],
    *,
    starts: Mapping[SystemStreamPartition, PartitionStart],
    side_inputs: Mapping[str, Iterable[str]],
) -> list[str]:
    """Why the job's stores cannot be rebuilt from its retained input by this replay (empty: they can)."""
    if not descriptors:
        return []
    names = ", ".join(repr(d.name) for d in descriptors)
    out = []
    gaps = [s for s in starts.values() if s.retention_gap]
    if gaps:
        where = "; ".join(f"{s.ssp.stream}-{s.ssp.partition} starts at {s.log_start}" for s in gaps)
        out.append(
            f"stores {names}: the input's retention no longer holds the earliest offsets needed ({where}; the records "
            "before were removed), so the state rebuilt would miss them; replay from a later time, whose records are all "
            "retained"
        )
    for table, streams in sorted(side_inputs.items()):
        out.append(
            f"stores {names}: the job joins table {table!r}, fed by side input {', '.join(sorted(streams))}; a replay "
            "would join the replayed records with its current contents, not those they met, so the state came from a "
            "side input and cannot be rebuilt from the job's input"
        )
    if not storage.transactional:
        out.append(
            f"stores {names}: task.transactional.state.checkpoint.enabled=false: each executor reuses its local store "
            "as it is, which a replay cannot clear; enable transactional state, run a batch, then replay"
        )
    return out


def clear_state(
    storage: StorageConfig,
    descriptors: Sequence[StoreDescriptor],
    model: JobModel,
    *,
    factor: int,
    from_generation: int,
    dry_run: bool = False,
    epoch: int | None = None,
) -> StateMove:
    """Every task's stores empty under one new checkpoint id (see the module doc); a dry run writes nothing."""
    start = time.perf_counter_ns()
    cp_id = CheckpointId.create()
    tasks = {t.task_name: t for t in model.tasks()}
    transfers = tuple(Transfer(task=t, store=d.name, sources=(), how="cleared") for t in sorted(tasks) for d in descriptors)
    ids = {t: cp_id for t in tasks}
    markers: dict[TaskName, Markers] = {}
    journal = None
    if not dry_run:
        blobs = BlobStoreManager(storage.blob_uri)
        backed = [d for d in descriptors if storage.store(d.name).backup_factories]
        if backed:
            journal = write_journal(
                storage, blobs, {t: () for t in tasks}, backed, cp_id=cp_id, from_generation=from_generation, epoch=epoch
            )
        work = Path(tempfile.mkdtemp(prefix="elasticity-replay-"))
        try:
            with ThreadPoolExecutor(storage.commit_threads(len(tasks)), thread_name_prefix="replay-state") as pool:
                futures = {
                    (t, d.name): pool.submit(
                        _empty,
                        storage,
                        storage.store(d.name),
                        d,
                        task=tasks[t],
                        task_count=len(tasks),
                        blobs=blobs,
                        folder=work / d.name / str(i),
                        cp_id=cp_id,
                    )
                    for i, t in enumerate(sorted(tasks))
                    for d in backed
                }
                for (t, name), f in sorted(futures.items()):
                    for backend, marker in f.result().items():
                        markers.setdefault(t, {}).setdefault(backend, {})[name] = marker
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return StateMove(
        old_factor=factor,
        new_factor=factor,
        checkpoint_id=cp_id,
        from_generation=from_generation,
        transfers=transfers,
        checkpoint_ids=ids,
        markers=markers,
        dry_run=dry_run,
        state_move_ns=time.perf_counter_ns() - start,
        journal=journal,
    )


def _empty(
    storage: StorageConfig,
    cfg: StoreConfig,
    d: StoreDescriptor,
    *,
    task: TaskModel,
    task_count: int,
    blobs: BlobStoreManager,
    folder: Path,
    cp_id: CheckpointId,
) -> dict[str, str]:
    """One task's store, empty, to each of its backups; its markers by factory."""
    db = open_db(folder / "db")
    try:
        ctx = _context(storage, cfg, d, task)
        out = {}
        if BLOB_STORE_FACTORY in cfg.backup_factories:
            snapshot = create_checkpoint(db, folder / "snapshot", cp_id)
            out[BLOB_STORE_FACTORY] = BlobStoreStateBackend(ctx, blobs).upload(cp_id, snapshot, None)
        if KAFKA_CHANGELOG_FACTORY in cfg.backup_factories:
            out[KAFKA_CHANGELOG_FACTORY] = _changelog_image(ctx, db, task_count)
        return out
    finally:
        db.close()
        shutil.rmtree(folder, ignore_errors=True)
