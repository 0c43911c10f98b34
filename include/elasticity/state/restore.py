"""Restoring one store of one virtual task to a checkpoint, after CheckpointV2's restore.

1. The store is open (parked since its snapshot, `state.handover`) and untouched
   since it was snapshotted as that checkpoint: nothing to do.
2. The live folder is sealed with the checkpoint's id (released by another
   process): open it as it is. Else a sealed local checkpoint folder has the checkpoint's id: clone it (hard links, no download).
3. Else the first restore factory with a marker for the store; a missing marker
   is logged as an ERROR and the next factory is tried.
4. With no marker at all, bootstrap from the start of the changelog (if any).
A restored snapshot is sealed locally too, so the next restart is case 2.
Without transactional state the live store is reused as it is, whatever it holds.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid

from elasticity.checkpoint.task_checkpoint import CheckpointV2
from elasticity.config import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY
from elasticity.state.backends.blobstore import BlobStoreStateBackend
from elasticity.state.backends.changelog import KafkaChangelogStateBackend
from elasticity.state.rocksdb import clone, write_checkpoint_id
from elasticity.state.taskstore import TaskStore

log = logging.getLogger(__name__)


def restore(ts: TaskStore, checkpoint: CheckpointV2 | None) -> str:
    """Returns where the state came from: open, local, empty, bootstrap, or a factory name."""
    start = time.perf_counter_ns()
    ts.claim()  # no other process has the live folder open while it is rebuilt
    cp_id = checkpoint.checkpoint_id if checkpoint else None
    markers = {f: m[ts.name] for f, m in (checkpoint.state_checkpoint_markers if checkpoint else {}).items() if ts.name in m}
    if cp_id is not None and ts.base == cp_id and (ts.kv is not None and not ts.kv.written or ts.live_is(cp_id)):
        ts.open()
        return "open"
    ts.close()
    source, restored = _rebuild(ts, checkpoint, markers)
    kv = ts.open()
    ts.base = cp_id
    markers.update(restored)  # a bootstrap knows the changelog offset it reached
    for factory, backend in ts.backups.items():
        backend.init(markers.get(factory), kv)
    ts.metrics.restore_ns += time.perf_counter_ns() - start
    return source


def _rebuild(ts: TaskStore, checkpoint: CheckpointV2 | None, markers: dict[str, str]) -> tuple[str, dict[str, str]]:
    dirs, ctx = ts.dirs, ts.context
    if not ctx.transactional and dirs.live.exists():
        return "local", {}
    if checkpoint is not None and ts.live_is(checkpoint.checkpoint_id):
        return "local", {}
    if checkpoint is not None and (local := dirs.valid_checkpoint(checkpoint.checkpoint_id)) is not None:
        clone(local, dirs.live)
        return "local", {}
    if checkpoint is None:
        _wipe(dirs.live)
        return "empty", {}
    level = logging.ERROR if _backed_up(ts) else logging.INFO  # see _backed_up
    for factory in ctx.config.restore_factories:
        if factory in markers:
            _from_backend(ts, checkpoint, factory, markers[factory])
            return factory, {}
        log.log(
            level,
            "store %r of task %r: checkpoint %s has no marker from %s; trying the next restore factory",
            ctx.name,
            ctx.task.name,
            checkpoint.checkpoint_id,
            factory,
        )
    if KAFKA_CHANGELOG_FACTORY in ts.backends:
        reached = _from_backend(ts, checkpoint, KAFKA_CHANGELOG_FACTORY, None)
        changelog = ts.backends[KAFKA_CHANGELOG_FACTORY]
        found = changelog.restored_records if isinstance(changelog, KafkaChangelogStateBackend) else 0
        log.log(
            logging.WARNING if found else logging.INFO,  # records without a marker: a store added, V1 checkpoints
            "store %r of task %r: no marker in checkpoint %s; bootstrapping from the changelog's start restored %d records",
            ctx.name,
            ctx.task.name,
            checkpoint.checkpoint_id,
            found,
        )
        return "bootstrap", {KAFKA_CHANGELOG_FACTORY: reached} if reached else {}
    if ctx.config.backup_factories:
        log.log(
            level,
            "store %r of task %r: no marker in checkpoint %s and no changelog; starting empty",
            ctx.name,
            ctx.task.name,
            checkpoint.checkpoint_id,
        )
    _wipe(dirs.live)
    return "empty", {}


def _backed_up(ts: TaskStore) -> bool:
    """Whether a missing marker means state an operator may have lost (ERROR). A blob store with no snapshot
    of the store is a normal first start (a new job's first batch, or a virtual task no batch has written
    yet): INFO. Without a blob store, a changelog bootstraps whatever it holds, so nothing is lost."""
    blob = ts.backends.get(BLOB_STORE_FACTORY)
    if isinstance(blob, BlobStoreStateBackend):
        return bool(blob.blobs.list(f"{blob.prefix}index/"))
    return KAFKA_CHANGELOG_FACTORY not in ts.backends


def _from_backend(ts: TaskStore, checkpoint: CheckpointV2, factory: str, marker: str | None) -> str | None:
    """Restore into a fresh folder, seal it as the checkpoint's local copy, then clone it live."""
    dirs = ts.dirs
    tmp = dirs.root / f"restore-{uuid.uuid4().hex[:8]}"
    dirs.root.mkdir(parents=True, exist_ok=True)
    try:
        restored = ts.backends[factory].restore(marker, tmp)
        ts.metrics.restores += 1
        ts.metrics.restore_bytes += sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
        write_checkpoint_id(tmp, checkpoint.checkpoint_id)
        target = dirs.checkpoint(checkpoint.checkpoint_id)
        _wipe(target)
        tmp.rename(target)
    finally:
        _wipe(tmp)
    clone(target, dirs.live)
    return restored


def _wipe(path) -> None:
    if path.exists():
        shutil.rmtree(path)
