"""State moves with its keys on a rescale F -> G.

New virtual task b (factor G) owns the keys whose input key hashes to b mod G.
Its state is the union of the entries of the old buckets a = b (mod gcd(F, G))
of the same parent task (the same input partitions) whose input key hashes to
b: taken from the old tasks' last committed snapshots, which hold exactly the
records below their offsets and watermarks, which is where `migrate` makes the
new task start.

`move_state`, for stores with the blob-store backend:
1. a journal blob names the attempt (its checkpoint id R, the generation it
   starts from, its lease epoch, the prefixes it writes under), before anything
   is uploaded, so that `clean_stale_moves` can delete what a crashed or
   superseded attempt left, and never what a later attempt is writing;
2. every old snapshot is downloaded and scanned once (`bucketscan`, in worker
   processes, one per core, while the downloads and uploads run on threads);
   each entry goes, by the router's hash of `StoreDescriptor.input_key_of`,
   into an SST file of its new task (SstFileWriter: a scan is sorted already);
3. as soon as its last source is scanned, a new task's SST files are ingested
   into an empty RocksDB whose checkpoint is uploaded as a snapshot with id R
   under the new task's name; the index blob id is the new marker. Old
   snapshots are never modified.
A new task with the same name, the same single source and changelog partition
(F = G, input partitions added) keeps its markers and checkpoint id as they are.

Changelog: a changelog-only store cannot move (a task's entries sit in the
changelog partition numbered after it, mixed with others): refused, naming the
store and the fix. For a dual-commit store the move appends an image of each
new task's state to its new changelog partition (every entry, then a tombstone
for every other key of its bucket the partition held), and the new changelog
marker is the image's last offset: a restore from either backend is the same.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from math import gcd
from pathlib import Path

from rocksdict import IngestExternalFileOptions

from elasticity import faults
from elasticity.api.descriptors import StoreDescriptor
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint
from elasticity.config import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY
from elasticity.jobmodel.model import NO_KEY_BUCKET, JobModel, SystemStreamPartition, TaskModel, TaskName
from elasticity.jobmodel.tasknames import parse_task_name
from elasticity.state.backends import StoreContext
from elasticity.state.backends.blob_manager import BlobStoreManager
from elasticity.state.backends.blobstore import BlobStoreStateBackend
from elasticity.state.bucketscan import ScanJob, ScanResult, ScanWorkers, scan
from elasticity.state.commit_manager import Markers
from elasticity.state.rocksdb import create_checkpoint, open_db
from elasticity.state.state_move import StateMove, Transfer, write_journal
from elasticity.state.store_config import StorageConfig, StoreConfig

log = logging.getLogger(__name__)


class StatefulRescaleError(ValueError):
    """A rescale that would lose or misplace state; nothing was changed."""


def _bucket(task: TaskName) -> int:
    b = parse_task_name(task).key_bucket
    return 0 if b == NO_KEY_BUCKET else b


def _bases(task: TaskModel) -> frozenset[SystemStreamPartition]:
    return frozenset(s.without_key_bucket() for s in task.system_stream_partitions)


def plan_sources(
    old_model: JobModel, old_factor: int, new_model: JobModel, new_factor: int
) -> dict[TaskName, tuple[TaskName, ...]]:
    """Per new task, the old tasks that hold a share of its keys: same input partitions, a = b (mod gcd).

    A store does not record which input partition a key came from, so an old
    task's partitions must all go to one new parent task (GroupByPartition and
    added partitions are fine; a regrouping that splits a task is refused).
    """
    g = gcd(old_factor, new_factor)
    group_of = {s: _bases(t) for t in new_model.tasks() for s in _bases(t)}
    old = [(t.task_name, _bases(t), _bucket(t.task_name)) for t in old_model.tasks()]
    for name, bases, _ in old:
        groups = {group_of[s] for s in bases if s in group_of}
        if len(groups) > 1:
            raise StatefulRescaleError(
                f"task {name.name!r} reads {sorted(map(str, bases))}, which the new job model splits over several tasks; "
                "a store does not know the input partition of its keys, so its state cannot follow (keep the grouper)"
            )
    out = {}
    for t in new_model.tasks():
        bases, b = _bases(t), _bucket(t.task_name)
        out[t.task_name] = tuple(sorted(n for n, ob, a in old if ob & bases and a % g == b % g))
    return out


@dataclass(kw_only=True)
class _Target:
    """What one new (task, store) has received so far: SST files (one per source with entries), keys, bytes."""

    folder: Path | None  # None: a dry run, nothing written
    sources_left: set[TaskName]
    keys: int = 0
    bytes: int = 0
    ssts: list[Path] = field(default_factory=list)

    def sst(self, source_index: int) -> str | None:
        return None if self.folder is None else str(self.folder / f"part-{source_index}.sst")


def _context(storage: StorageConfig, cfg: StoreConfig, d: StoreDescriptor, task: TaskModel) -> StoreContext:
    return StoreContext(
        job_name=storage.job_name,
        job_id=storage.job_id,
        task=task.task_name,
        changelog_partition=task.changelog_partition,
        config=cfg,
        descriptor=d,
        transactional=storage.transactional,
    )


def _kept(
    sources: Mapping[TaskName, tuple[TaskName, ...]],
    old_tasks: Mapping[TaskName, TaskModel],
    new_tasks: Mapping[TaskName, TaskModel],
    *,
    old_factor: int,
    new_factor: int,
    storage: StorageConfig,
) -> set[TaskName]:
    """The new tasks that keep their state: same name, one source that gives it every key, and (with a changelog)
    the same changelog partition."""
    if old_factor != new_factor:
        return set()
    changelog = any(KAFKA_CHANGELOG_FACTORY in s.backup_factories for s in storage.stores)
    return {
        t
        for t, src in sources.items()
        if src == (t,) and (not changelog or old_tasks[t].changelog_partition == new_tasks[t].changelog_partition)
    }


def move_state(
    storage: StorageConfig,
    descriptors: Sequence[StoreDescriptor],
    old_model: JobModel,
    *,
    old_factor: int,
    from_generation: int,
    old_cps: Mapping[TaskName, TaskCheckpoint],
    new_model: JobModel,
    new_factor: int,
    dry_run: bool = False,
    epoch: int | None = None,
) -> StateMove:
    """Build and upload every new task's snapshots (with `dry_run`: only read and count); see the module doc.
    `epoch`: the lease epoch of the attempt moving, in its journal."""
    start = time.perf_counter_ns()
    cp_id = CheckpointId.create()
    sources = plan_sources(old_model, old_factor, new_model, new_factor)
    old_tasks = {t.task_name: t for t in old_model.tasks()}
    new_tasks = {t.task_name: t for t in new_model.tasks()}
    kept = _kept(sources, old_tasks, new_tasks, old_factor=old_factor, new_factor=new_factor, storage=storage)
    moving = {t: src for t, src in sources.items() if t not in kept}
    _refuse_unmovable(storage, descriptors, moving, old_cps)
    transfers, ids, markers = _keep(kept, sources, old_cps, descriptors)
    blobs = BlobStoreManager(storage.blob_uri)
    journal = None
    if not dry_run and any(moving.values()):
        journal = write_journal(storage, blobs, moving, descriptors, cp_id=cp_id, from_generation=from_generation, epoch=epoch)
    mover = _Mover(
        storage,
        blobs,
        old_tasks,
        new_tasks=new_tasks,
        new_factor=new_factor,
        cp_id=cp_id,
        dry_run=dry_run,
        workers=_scan_workers(descriptors, len(old_tasks)),
    )
    try:
        for d in descriptors:
            mover.move(d, moving, old_cps, transfers=transfers, ids=ids, markers=markers)
    finally:
        mover.close()
    move = StateMove(
        old_factor=old_factor,
        new_factor=new_factor,
        checkpoint_id=cp_id,
        from_generation=from_generation,
        transfers=tuple(transfers),
        checkpoint_ids=ids,
        markers=markers,
        dry_run=dry_run,
        state_move_ns=time.perf_counter_ns() - start,
        journal=journal,
    )
    if not dry_run:
        faults.point("rescale.state.moved")
    return move


def _keep(
    kept: set[TaskName],
    sources: Mapping[TaskName, tuple[TaskName, ...]],
    old_cps: Mapping[TaskName, TaskCheckpoint],
    descriptors: Sequence[StoreDescriptor],
) -> tuple[list[Transfer], dict[TaskName, CheckpointId], dict[TaskName, Markers]]:
    """The transfers, checkpoint ids and markers of the tasks that keep their state: the old checkpoint's own."""
    transfers: list[Transfer] = []
    ids: dict[TaskName, CheckpointId] = {}
    markers: dict[TaskName, Markers] = {}
    for t in sorted(kept):
        old = old_cps.get(t)
        if old is not None and old.checkpoint_id is not None:
            ids[t], markers[t] = old.checkpoint_id, {f: dict(m) for f, m in old.state_markers.items()}
        transfers += [Transfer(task=t, store=d.name, sources=sources[t], how="kept") for d in descriptors]
    return transfers, ids, markers


class _Mover:
    """One move's workers, threads and scratch folder; `move` moves one store."""

    def __init__(
        self,
        storage: StorageConfig,
        blobs: BlobStoreManager,
        old_tasks: Mapping[TaskName, TaskModel],
        *,
        new_tasks: Mapping[TaskName, TaskModel],
        new_factor: int,
        cp_id: CheckpointId,
        dry_run: bool,
        workers: ScanWorkers | None,
    ) -> None:
        self.storage, self.blobs, self.old_tasks, self.new_tasks = storage, blobs, old_tasks, new_tasks
        self.new_factor, self.cp_id, self.dry_run, self.workers = new_factor, cp_id, dry_run, workers
        self.work = Path(tempfile.mkdtemp(prefix="elasticity-state-move-"))
        self.pool = ThreadPoolExecutor(storage.commit_threads(len(old_tasks) + len(new_tasks)), thread_name_prefix="state-move")

    def move(
        self,
        d: StoreDescriptor,
        moving: Mapping[TaskName, tuple[TaskName, ...]],
        old_cps: Mapping[TaskName, TaskCheckpoint],
        *,
        transfers: list[Transfer],
        ids: dict[TaskName, CheckpointId],
        markers: dict[TaskName, Markers],
    ) -> None:
        """Every source downloads at once and is scanned as it arrives; a new task is ingested and uploaded
        as soon as its last source is scanned."""
        found = _snapshots(d, moving, old_cps)
        targets = {
            t: _Target(folder=None if self.dry_run else self.work / d.name / str(i), sources_left={s for s in src if s in found})
            for i, (t, src) in enumerate(sorted(moving.items()))
        }
        by_source: dict[TaskName, list[TaskName]] = {}
        for t, src in moving.items():
            for s in src:
                by_source.setdefault(s, []).append(t)
        uploads = self._scan_and_upload(d, found, targets, by_source)
        for t, target in sorted(targets.items()):
            if any(s in found for s in moving[t]):
                ids[t] = self.cp_id
                transfers.append(Transfer(task=t, store=d.name, sources=moving[t], keys=target.keys, bytes=target.bytes))
            else:
                transfers.append(Transfer(task=t, store=d.name, sources=moving[t], how="empty"))
        for t, upload in sorted(uploads.items()):
            for factory, marker in upload.result().items():
                markers.setdefault(t, {}).setdefault(factory, {})[d.name] = marker
            faults.point("rescale.state.uploaded")

    def _scan_and_upload(
        self,
        d: StoreDescriptor,
        found: Mapping[TaskName, str],
        targets: Mapping[TaskName, _Target],
        by_source: Mapping[TaskName, list[TaskName]],
    ) -> dict[TaskName, Future[dict[str, str]]]:
        """Read every source snapshot at once; as each is scanned, its buckets count towards their targets, and a
        target whose last source it was starts its upload (none in a dry run). The uploads under way, by task."""
        cfg = self.storage.store(d.name)
        reads = {
            self.pool.submit(
                self._read, d, cfg, s, marker=m, i=i, outputs={_bucket(t): targets[t].sst(i) for t in by_source[s]}
            ): (i, s)
            for i, (s, m) in enumerate(found.items())
        }
        uploads = {}
        for future in as_completed(reads):
            (i, s), result = reads[future], future.result()
            if result.error:
                raise StatefulRescaleError(result.error)
            for t in by_source[s]:
                target, b = targets[t], _bucket(t)
                target.keys += result.keys.get(b, 0)
                target.bytes += result.bytes.get(b, 0)
                sst = target.sst(i)
                if b in result.keys and sst is not None:
                    target.ssts.append(Path(sst))
                target.sources_left.discard(s)
                if not target.sources_left and not self.dry_run:
                    uploads[t] = self.pool.submit(
                        _write,
                        self.storage,
                        cfg,
                        d,
                        task=self.new_tasks[t],
                        task_count=len(self.new_tasks),
                        blobs=self.blobs,
                        target=target,
                        cp_id=self.cp_id,
                    )
            faults.point("rescale.state.source_read")
        return uploads

    def _read(
        self, d: StoreDescriptor, cfg: StoreConfig, source: TaskName, *, marker: str, i: int, outputs: dict[int, str | None]
    ) -> ScanResult:
        """Download one old snapshot and scan it (in a worker process when there are workers)."""
        folder = self.work / "source" / d.name / str(i)
        BlobStoreStateBackend(_context(self.storage, cfg, d, self.old_tasks[source]), self.blobs).restore(marker, folder)
        try:
            job = ScanJob(folder=str(folder), factor=self.new_factor, outputs=outputs, store=d.name, source=source.name)
            if self.workers is not None and d.input_key is None:
                return self.workers.run(job)
            return scan(job, None if d.input_key is None else d.input_key_of)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.workers is not None:
            self.workers.close()
        shutil.rmtree(self.work, ignore_errors=True)


def _snapshots(
    d: StoreDescriptor, moving: Mapping[TaskName, tuple[TaskName, ...]], old_cps: Mapping[TaskName, TaskCheckpoint]
) -> dict[TaskName, str]:
    """The blob-store marker of store `d` in each source's old checkpoint, by source in name order; a source
    without one (no state committed yet) gives its targets nothing."""
    markers_of = {
        s: old_cps[s].state_markers.get(BLOB_STORE_FACTORY, {}).get(d.name) if s in old_cps else None
        for src in moving.values()
        for s in src
    }
    return {s: m for s, m in sorted(markers_of.items()) if m is not None}


def _refuse_unmovable(
    storage: StorageConfig,
    descriptors: Sequence[StoreDescriptor],
    moving: Mapping[TaskName, tuple[TaskName, ...]],
    old_cps: Mapping[TaskName, TaskCheckpoint],
) -> None:
    """Committed state that only the changelog holds cannot be split by bucket here."""
    for d in descriptors:
        cfg = storage.store(d.name)
        for s in sorted({s for src in moving.values() for s in src}):
            cp = old_cps.get(s)
            held = {f for f, m in (cp.state_markers if cp else {}).items() if d.name in m}
            if not held or BLOB_STORE_FACTORY in held:
                continue
            if BLOB_STORE_FACTORY not in cfg.backup_factories:
                raise StatefulRescaleError(
                    f"store {d.name!r} is backed up by the Kafka changelog only, which cannot be split by key bucket; "
                    f"add the blob store (stores.{d.name}.backup.factories=kafka,blobstore, and blob.store.uri), run a batch "
                    "so that a snapshot is committed, then rescale; nothing was changed"
                )
            raise StatefulRescaleError(
                f"store {d.name!r} of task {s.name!r}: its checkpoint has no blob-store snapshot yet (only {sorted(held)}); "
                "run a batch so that one is committed, then rescale; nothing was changed"
            )


def _scan_workers(descriptors: Sequence[StoreDescriptor], sources: int) -> ScanWorkers | None:
    """One scan process per core, when there are several of both; a store whose input key needs
    the app's function (StoreDescriptor.input_key) is scanned in this process."""
    count = min(os.cpu_count() or 1, sources)
    return ScanWorkers(count) if count > 1 and any(d.input_key is None for d in descriptors) else None


def _write(
    storage: StorageConfig,
    cfg: StoreConfig,
    d: StoreDescriptor,
    *,
    task: TaskModel,
    task_count: int,
    blobs: BlobStoreManager,
    target: _Target,
    cp_id: CheckpointId,
) -> dict[str, str]:
    """Ingest the target's SST files into a new RocksDB, upload its snapshot; its markers by factory."""
    assert target.folder is not None
    db = open_db(target.folder / "db")
    try:
        if target.ssts:
            opts = IngestExternalFileOptions()
            opts.set_move_files(True)
            db.ingest_external_file([str(p) for p in target.ssts], opts)
        snapshot = create_checkpoint(db, target.folder / "snapshot", cp_id)
        ctx = _context(storage, cfg, d, task)
        out = {BLOB_STORE_FACTORY: BlobStoreStateBackend(ctx, blobs).upload(cp_id, snapshot, None)}
        if KAFKA_CHANGELOG_FACTORY in cfg.backup_factories:
            out[KAFKA_CHANGELOG_FACTORY] = _changelog_image(ctx, db, task_count)
        return out
    finally:
        db.close()
        shutil.rmtree(target.folder, ignore_errors=True)


def _changelog_image(ctx: StoreContext, db, task_count: int) -> str:
    """Append the new state to the task's changelog partition; the marker of its last record."""
    from elasticity.state.backends.changelog import ChangelogClient, KafkaChangelogMarker, KafkaChangelogStateBackend

    assert ctx.config.changelog_kafka is not None
    client = ChangelogClient(ctx.config.changelog_kafka)
    try:
        backend = KafkaChangelogStateBackend(ctx, client, task_count)  # creates or widens the topic
        stale = {k for _, k, _ in client.read(backend.tp, 0, None) if k is not None and ctx.owns(k)}

        def image() -> Iterator[tuple[bytes, bytes | None]]:
            for k, v in db.items():
                stale.discard(k)
                yield k, v
            yield from ((k, None) for k in sorted(stale))

        last = client.write(backend.tp, image())
        faults.point("rescale.state.changelog_written")
        return KafkaChangelogMarker(backend.ssp, last).to_json()
    finally:
        client.close()
