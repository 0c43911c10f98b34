"""The stores of a container's virtual tasks (Samza's ContainerStorageManager):
opens and restores them on `job.container.restore.thread.pool.size` threads,
hands operators their task's stores, and runs the commit of all tasks with
uploads on a pool of min(virtual tasks, 64) threads
(`job.container.commit.thread.pool.size`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from elasticity.api.descriptors import StoreDescriptor
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV2
from elasticity.config import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY
from elasticity.jobmodel.model import TaskModel, TaskName
from elasticity.kafka.clients import SystemClients
from elasticity.state.backends import StateBackend, StoreContext
from elasticity.state.backends.blob_manager import BlobStoreManager
from elasticity.state.backends.blobstore import BlobStoreStateBackend
from elasticity.state.backends.changelog import ChangelogClient, KafkaChangelogStateBackend
from elasticity.state.commit_manager import Markers, TaskSnapshot, TaskStorageCommitManager
from elasticity.state.kv import KeyValueStore
from elasticity.state.restore import restore
from elasticity.state.store_config import StorageConfig
from elasticity.state.store_metrics import StoreMetrics
from elasticity.state.taskstore import TaskStore


class ContainerStorageManager:
    def __init__(
        self,
        config: StorageConfig,
        descriptors: Sequence[StoreDescriptor],
        tasks: Sequence[TaskModel],
        changelog_partitions: int,
    ) -> None:
        """`changelog_partitions`: the job's task count (partitions of each changelog topic)."""
        self.config = config
        self._clients: dict[SystemClients, ChangelogClient] = {}
        self._blobs: BlobStoreManager | None = None
        self.tasks: dict[TaskName, dict[str, TaskStore]] = {}
        for task in tasks:
            stores = {}
            for d in descriptors:
                ctx = StoreContext(
                    job_name=config.job_name,
                    job_id=config.job_id,
                    task=task.task_name,
                    changelog_partition=task.changelog_partition,
                    config=config.store(d.name),
                    descriptor=config.store(d.name).descriptor(d),
                    transactional=config.transactional,
                )
                factories = dict.fromkeys(ctx.config.backup_factories + ctx.config.restore_factories)
                if ctx.config.changelog is not None:
                    factories[KAFKA_CHANGELOG_FACTORY] = None  # the fallback of last resort: bootstrap
                stores[d.name] = TaskStore(
                    ctx, config.local_state_dir(), {f: self._backend(f, ctx, changelog_partitions) for f in factories}
                )
            self.tasks[task.task_name] = stores
        self.committers = {t: TaskStorageCommitManager(t, s) for t, s in self.tasks.items()}
        self._commit_pool = ThreadPoolExecutor(config.commit_threads(len(tasks)), thread_name_prefix="state-upload")
        self._restore_pool = ThreadPoolExecutor(config.restore_threads(len(tasks)), thread_name_prefix="state-restore")

    def _backend(self, factory: str, ctx: StoreContext, partitions: int) -> StateBackend:
        if factory == KAFKA_CHANGELOG_FACTORY:
            kafka = ctx.config.changelog_kafka
            assert kafka is not None
            client = self._clients.setdefault(kafka, ChangelogClient(kafka))
            return KafkaChangelogStateBackend(ctx, client, partitions)
        if factory == BLOB_STORE_FACTORY:
            if self._blobs is None:
                self._blobs = BlobStoreManager(self.config.blob_uri)
            return BlobStoreStateBackend(ctx, self._blobs, self.config.commit_timeout_ms / 1000)
        raise ValueError(f"unknown state backend factory {factory!r}")

    @property
    def blobs(self) -> BlobStoreManager | None:
        return self._blobs

    def restore(self, checkpoints: Mapping[TaskName, CheckpointV2 | None]) -> dict[TaskName, dict[str, str]]:
        """Every store of every task to its task's checkpoint (None: none yet); returns each store's source."""
        futures = {
            (task, name): self._restore_pool.submit(restore, ts, checkpoints.get(task))
            for task, stores in self.tasks.items()
            for name, ts in stores.items()
        }
        out: dict[TaskName, dict[str, str]] = {}
        for (task, name), f in futures.items():
            out.setdefault(task, {})[name] = f.result()
        return out

    def restore_task(self, task: TaskName, checkpoint: CheckpointV2 | None) -> dict[str, str]:
        """One task's stores, on the caller's thread (a slice restores its own task as it starts)."""
        return {name: restore(ts, checkpoint) for name, ts in self.tasks[task].items()}

    def store(self, task: TaskName, name: str) -> KeyValueStore:
        """What `context.store(name)` gives an operator running for `task` (after `restore`)."""
        ts = self.tasks[task][name]
        if ts.kv is None:
            raise RuntimeError(f"store {name!r} of task {task.name!r} is not restored yet: call restore() first")
        return ts.kv

    def snapshot(self, checkpoint_id: CheckpointId, tasks: Collection[TaskName] | None = None) -> tuple[TaskSnapshot, ...]:
        """Synchronous: processing must be paused. One checkpoint id for the whole batch; `tasks`: only these."""
        return tuple(c.snapshot(checkpoint_id) for t, c in self.committers.items() if tasks is None or t in tasks)

    def release(self, tasks: Collection[TaskName] | None = None) -> None:
        """Close every store (of `tasks`), sealing those untouched since their snapshot (see TaskStore.release)."""
        for task, stores in self.tasks.items():
            if tasks is None or task in tasks:
                for ts in stores.values():
                    ts.release()

    def upload(self, snapshots: Sequence[TaskSnapshot]) -> dict[TaskName, Markers]:
        """Every backend of every store in parallel; the markers for each task's CheckpointV2."""
        waits = {s.task_name: self.committers[s.task_name].submit_upload(s, self._commit_pool) for s in snapshots}
        return {task: wait() for task, wait in waits.items()}

    def cleanup(self, checkpoints: Mapping[TaskName, CheckpointV2]) -> None:
        """After the checkpoints are written."""
        futures = [
            self._commit_pool.submit(
                self.committers[t].cleanup, cp.checkpoint_id, {f: dict(m) for f, m in cp.state_checkpoint_markers.items()}
            )
            for t, cp in checkpoints.items()
            if t in self.committers
        ]
        for f in futures:
            f.result()

    def metrics(self) -> dict[TaskName, dict[str, StoreMetrics]]:
        return {t: {n: ts.metrics for n, ts in stores.items()} for t, stores in self.tasks.items()}

    def close(self) -> None:
        self._commit_pool.shutdown(wait=True)
        self._restore_pool.shutdown(wait=True)
        for stores in self.tasks.values():
            for ts in stores.values():
                ts.release()
        for client in self._clients.values():
            client.close()
