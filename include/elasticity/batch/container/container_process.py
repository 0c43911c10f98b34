"""The Python worker as a container process: what it keeps from one batch to the next.

Samza's SamzaContainer is one process that holds its tasks' clients and stores for as long as it runs; here
the process is a Spark Python worker, reused from batch to batch (and Spark hands it any of the job's slots).
Its caches are gathered in one `ContainerProcess`:

- created on first use in the process (`container_process()`), on the first slot it runs, and held by the
  process registry (`elasticity.process_registry`), the one place a process keeps state;
- reused across batches while Spark reuses the worker: the app as loaded, its pass histories, the slice
  threads, the Kafka consumers of the read and the stores' containers (`state.worker`);
- closed with the registry (`PROCESS.close()`: consumers closed, containers' uploads awaited and stores
  closed) at the process's exit and in tests; a driver that read directly closes just its consumers
  (`close_consumers`). Spark ends its daemon's workers with os._exit, where nothing runs, as it always has;
  a store left open is sealed by its next owner (`state.handover`).

Lookups here happen per batch, slot or chunk, never per record.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from elasticity.api.descriptors import StoreDescriptor
from elasticity.api.stream import ApplicationDescriptor, load_application
from elasticity.batch.container.scheduling import PassHistory
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.clients import Kafka
from elasticity.process_registry import PROCESS
from elasticity.state.store_config import StorageConfig
from elasticity.state.worker import BatchState, ContainerState

if TYPE_CHECKING:
    from confluent_kafka import Consumer

ContainerKey = tuple[StorageConfig, tuple[tuple[str, int], ...]]  # store config, (task, changelog partition) of its tasks


@dataclass(eq=False, kw_only=True)
class ContainerProcess:
    """One Python worker's state across batches (see the module's docstring for its lifetime)."""

    apps: dict[tuple[str | None, tuple[SystemStream, ...]], ApplicationDescriptor] = field(default_factory=dict)
    histories: dict[str, PassHistory] = field(default_factory=dict)  # app class -> its passes, learnt here
    last_slot: dict[str, int] = field(default_factory=dict)  # job -> the slot run last here (its stores are open here)
    slots_started: int = 0
    consumers: dict[Kafka, Consumer] = field(default_factory=dict)  # the reader's, one per client settings
    containers: dict[ContainerKey, ContainerState] = field(default_factory=dict)
    pool: ThreadPoolExecutor | None = None
    _apps_lock: threading.Lock = field(default_factory=threading.Lock)
    _containers_lock: threading.Lock = field(default_factory=threading.Lock)
    _pool_lock: threading.Lock = field(default_factory=threading.Lock)

    def start_slot(self) -> None:
        """PySpark's daemon runs a full gc.collect() in a reused Python worker after each of its tasks, holding the
        GIL while that task's snapshot uploads run and before the next task is read. A warm worker holds some 130k
        long-lived objects (its modules, clients, stores), and each such collection took 80-370 ms here. What is
        alive as a process's second slot starts is long-lived (the first slot's imports and caches; the first
        slot's garbage is collected): it is frozen once (gc.freeze), so later collections scan only what is newer."""
        self.slots_started += 1
        if self.slots_started == 2:
            gc.freeze()

    def application(self, app_class: str, inputs: tuple[SystemStream, ...]) -> ApplicationDescriptor:
        """The app, loaded once per process (and again after `forget_applications`)."""
        key = (app_class, inputs)
        with self._apps_lock:
            if key not in self.apps:
                self.apps[key] = load_application(app_class, inputs)
            return self.apps[key]

    def forget_applications(self) -> None:
        """The user's code changed (`batch.container.shipped`): apps built from the code it replaces are loaded again."""
        with self._apps_lock:
            self.apps.clear()

    def history(self, app_class: str) -> PassHistory:
        with self._apps_lock:
            return self.histories.setdefault(app_class, PassHistory())

    def threads(self, size: int) -> ThreadPoolExecutor:
        """The process's slice threads, kept from batch to batch: a pool started per slot and batch spent more
        than the slices themselves at thousands of small virtual tasks (a thread and a future per slice)."""
        with self._pool_lock:
            if self.pool is None or self.pool._max_workers < size:
                if self.pool is not None:
                    self.pool.shutdown(wait=False)
                self.pool = ThreadPoolExecutor(size, thread_name_prefix="vtask")
            return self.pool

    def open_container(self, state: BatchState, descriptors: Collection[StoreDescriptor], slot: int) -> ContainerState:
        """This process's ContainerState for the slot's tasks (cached per job, store config and task set),
        set to where the batch starts."""
        tasks = state.slots[slot]
        with self._containers_lock:
            key = (state.storage, tasks)
            if key not in self.containers:
                self.containers[key] = ContainerState(state, descriptors, tasks)
            container = self.containers[key]
        container.begin(state)
        return container

    def close_container(self, key: ContainerKey) -> None:
        """Close one container's stores once its uploads and cleanups have ended (parked ones too)."""
        with self._containers_lock:
            container = self.containers.pop(key, None)
        if container is not None:
            container.close()

    def close_consumers(self) -> None:
        while self.consumers:
            self.consumers.popitem()[1].close()

    def close(self) -> None:
        """The end of this process's use: its consumers, containers and slice threads closed."""
        self.close_consumers()
        for key in list(self.containers):
            self.close_container(key)
        with self._pool_lock:
            if self.pool is not None:
                self.pool.shutdown(wait=True)
                self.pool = None


def container_process() -> ContainerProcess:
    """This process's ContainerProcess, created on first use (held by the process registry)."""
    return PROCESS.get(ContainerProcess)
