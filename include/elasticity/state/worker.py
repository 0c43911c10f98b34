"""A container's stores inside a Spark Python worker, across batches.

The driver ships a `BatchState` with each batch: the checkpoint each virtual
task starts from, the last checkpoint written (for cleanup) and the id of this
batch's snapshots. The worker process keeps one ContainerStorageManager per
job and task set (`batch.container.container_process`), so a warm session reuses its clients, pools
and backends; a task whose stores this process released after its own snapshot
is reopened as it is (no restore).

A task's stores stay open after its snapshot (parked, `state.handover`): its
next batch in this process uses them as they are. Spark may hand that batch to
another Python worker of the host, which asks for them; this process's keeper
thread then closes them sealed with their checkpoint id, and that process opens
them as they are too. A slot releases, as it starts, the stores it parked for
other slots, and as it ends, those not parked (a task that stopped or failed).

A task's upload starts as its slice ends, on a thread of its own, in commit
order (an incremental upload builds on the previous one), overlapping the slot's
other slices and the next batch; the driver waits for the markers to be durable
before writing the checkpoint. A failed upload leaves `<index>.failed` beside the
index it promised, so the driver fails at once instead of at
task.commit.timeout.ms; an upload that runs longer than a heartbeat rewrites
`<index>.alive`, so the driver also gives up soon on one whose executor was lost.
Cleanup runs on the task's thread too, for checkpoints the driver reports as
written.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from elasticity.api.descriptors import StoreDescriptor
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV2
from elasticity.config import BLOB_STORE_FACTORY
from elasticity.jobmodel.model import TaskModel, TaskName
from elasticity.state.backends.blob_manager import ALIVE, FAILED, HEARTBEAT_S, BlobStoreManager
from elasticity.state.commit_manager import Markers, TaskSnapshot
from elasticity.state.container import ContainerStorageManager
from elasticity.state.handover import parking
from elasticity.state.store_config import StorageConfig
from elasticity.state.taskstore import TaskStore

log = logging.getLogger(__name__)
GAUGES = ("bytes-uploaded", "disk-usage-bytes")  # reported as they are; the other store metrics are counters


@dataclass(frozen=True, kw_only=True)
class BatchState:
    """What the driver ships to the process stage of a stateful job, per batch (plain values)."""

    storage: StorageConfig
    checkpoint_id: CheckpointId  # of this batch's snapshots, fresh per attempt
    slots: Mapping[int, tuple[tuple[str, int], ...]]  # process slot -> (task name, changelog partition) of its tasks
    start: Mapping[str, CheckpointV2 | None]  # task -> the checkpoint the batch starts from (None: no state yet)
    written: Mapping[str, CheckpointV2]  # task -> its last checkpoint in the store (what cleanup may rely on)
    changelog_partitions: int  # the job's task count


class ContainerState:
    """One process's stores of one container's virtual tasks."""

    def __init__(self, state: BatchState, descriptors: Collection[StoreDescriptor], tasks: tuple[tuple[str, int], ...]) -> None:
        models = [TaskModel(TaskName(t), frozenset(), p) for t, p in tasks]
        self.csm = ContainerStorageManager(state.storage, list(descriptors), models, state.changelog_partitions)
        # per task, its uploads and cleanups in order (an incremental upload builds on the one before)
        self._queues = {TaskName(t): ThreadPoolExecutor(1, thread_name_prefix="state-commit") for t, _ in tasks}
        self._heartbeat = Heartbeat(self.csm.blobs) if self.csm.blobs is not None else None
        self._cleaned: dict[TaskName, CheckpointId] = {}
        self._start: Mapping[str, CheckpointV2 | None] = {}
        self.sources: dict[TaskName, dict[str, str]] = {}  # of this batch's restores
        self._reported: dict[TaskName, dict[str, dict[str, int]]] = {}

    def begin(self, state: BatchState) -> None:
        """Release the stores this process parked for other slots; clean up after written checkpoints (in the
        background); each task restores as its slice starts."""
        parking().release_all(keep=set(self._stores()))
        written = {TaskName(t): cp for t, cp in state.written.items() if TaskName(t) in self.csm.tasks}
        fresh = {t: cp for t, cp in written.items() if self._cleaned.get(t) != cp.checkpoint_id}
        if fresh:
            self._cleaned.update({t: cp.checkpoint_id for t, cp in fresh.items()})
            for task, cp in fresh.items():
                self._queues[task].submit(self._cleanup, {task: cp})
        self._start = state.start
        self.sources = {}

    def restore(self, task: TaskName) -> dict[str, str]:
        """The task's stores to where the batch starts, on its slice's thread: while one task opens its
        stores, the others' slices run. Returns where each came from (open, local, a factory, empty)."""
        for ts in self.csm.tasks[task].values():
            parking().take(ts)
        self.sources[task] = self.csm.restore_task(task, self._start.get(task.name))
        return self.sources[task]

    def store(self, task: TaskName, name: str) -> Any:
        return self.csm.store(task, name)

    def snapshot(self, checkpoint_id: CheckpointId, task: TaskName) -> TaskSnapshot:
        """The synchronous snapshot of one task's stores as soon as its slice is done; they stay open, parked."""
        (snapshot,) = self.csm.snapshot(checkpoint_id, [task])
        for ts in self.csm.tasks[task].values():
            parking().park(ts)
        return snapshot

    def commit(self, snapshot: TaskSnapshot) -> Markers:
        """Start the upload of one task's snapshot in the background, as soon as its slice is done (not
        after the slot's last: the batch's commit then waits only for the busiest task's upload); returns
        the markers its CheckpointV2 will carry (known before the upload ends)."""
        markers: Markers = {}
        for store in snapshot.stores:
            for factory, marker in store.pending:
                assert marker is not None, f"backend {factory} names no marker at snapshot time"
                markers.setdefault(factory, {})[store.store] = marker
        indexes = list(markers.get(BLOB_STORE_FACTORY, {}).values())
        if self._heartbeat is not None:
            self._heartbeat.add(indexes)
        self._queues[snapshot.task_name].submit(self._upload, snapshot, indexes)
        return markers

    def release(self) -> None:
        """The slot is done: its stores that are not parked close (written since their snapshot, if any)."""
        parking().release_unparked(self._stores())

    def _stores(self) -> list[TaskStore]:
        return [ts for stores in self.csm.tasks.values() for ts in stores.values()]

    def report(self, task: TaskName) -> dict[str, dict[str, Any]]:
        """Per store of `task`: its counters since its last report (uploads finish after a batch reports,
        so they count in the next one), its gauges, and where the last restore took it from."""
        now = {s: m.as_dict() for s, m in self.csm.metrics()[task].items()}
        last, self._reported[task] = self._reported.get(task, {}), now
        return {
            s: {k: v if k in GAUGES else v - last.get(s, {}).get(k, 0) for k, v in m.items()}
            | {"restored-from": self.sources[task][s]}
            for s, m in now.items()
        }

    def close(self) -> None:
        """The end of this process's use of the container: its queued uploads and cleanups end, then every
        store closes, parked ones too."""
        for ts in self._stores():
            parking().take(ts)
        for q in self._queues.values():
            q.shutdown(wait=True)
        self.csm.close()

    def _upload(self, snapshot: TaskSnapshot, indexes: list[str]) -> None:
        try:
            self.csm.upload([snapshot])
        except Exception as e:  # noqa: BLE001 - reported to the driver through the blob store
            log.exception("state upload of %s's checkpoint %s failed", snapshot.task_name.name, snapshot.checkpoint_id)
            blobs = self.csm.blobs
            for index in indexes:
                if blobs is not None and not blobs.exists(index):
                    blobs.put_bytes(index + FAILED, f"{type(e).__name__}: {e}".encode())
        finally:
            if self._heartbeat is not None:
                self._heartbeat.done(indexes)

    def _cleanup(self, written: dict[TaskName, CheckpointV2]) -> None:
        try:
            self.csm.cleanup(written)
        except Exception:  # noqa: BLE001 - the next cleanup retries; nothing depends on it
            log.exception("state cleanup failed")


class Heartbeat:
    """Rewrites `<index>.alive` every HEARTBEAT_S for each index an upload queued or running here has
    promised, so the driver can tell a slow upload from one lost with its executor. Uploads that end
    within a heartbeat write nothing."""

    def __init__(self, blobs: BlobStoreManager, interval_s: float = HEARTBEAT_S) -> None:
        self.blobs, self.interval_s = blobs, interval_s
        self._beats: dict[str, int] = {}  # promised index -> heartbeats written
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, indexes: Collection[str]) -> None:
        with self._lock:
            self._beats.update(dict.fromkeys(indexes, 0))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="state-heartbeat", daemon=True)
                self._thread.start()

    def done(self, indexes: Collection[str]) -> None:
        with self._lock:
            beaten = [i for i in indexes if self._beats.pop(i, 0)]
        for index in beaten:
            self.blobs.delete(index + ALIVE)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)
            with self._lock:
                if not self._beats:
                    self._thread = None
                    return
                beats = {i: n + 1 for i, n in self._beats.items()}
                self._beats.update(beats)
            for index, n in beats.items():
                with contextlib.suppress(OSError):  # a missed beat only brings the driver's give-up nearer
                    self.blobs.put_bytes(index + ALIVE, str(n).encode())
