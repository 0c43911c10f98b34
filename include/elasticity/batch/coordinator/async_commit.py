"""Async commit, after CheckpointV2's design: the commit is split into a
synchronous snapshot (the caller fixes the offsets) and an upload (here, on a
thread) that overlaps the next batch.

When the next commit is due while an upload still runs: if that upload has
taken at most `task.commit.max.delay.ms`, the new commit is skipped and folded
into the one after it (checkpoints are cumulative); beyond that, it waits for
the upload. `task.commit.timeout.ms` bounds any wait.

Batches commit in order: once an upload fails, the committer commits nothing
more (the batches behind it started from its snapshot and replay after it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from elasticity import faults
from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint

Committed = Callable[[BatchPlan, tuple[int, ...], int], None]  # plan, batches it covers, commit-ns
BeforeCommit = Callable[[BatchPlan, list[TaskCheckpoint], tuple[int, ...]], None]  # plan, checkpoints, batches it covers
AwaitState = Callable[[list[TaskCheckpoint], float], None]  # returns once the checkpoints' state markers are durable


GATE_S = 1.0  # the longest an upload waits for the next batch's plan to be written


class CommitTimeout(RuntimeError):
    pass


class AsyncCommitter:
    def __init__(
        self,
        store: CheckpointStore,
        write_versions: tuple[int, ...],
        owner: str,
        *,
        max_delay_ms: int,
        timeout_ms: int,
        on_committed: Committed | None = None,
        await_state: AwaitState | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        before_commit: BeforeCommit | None = None,
    ) -> None:
        """`await_state`: for jobs with stores, whose snapshots upload in the workers: the
        checkpoint is written only once its markers are durable, within task.commit.timeout.ms.
        `on_failure`: told at once when a commit fails, while the next batch may be running on it.
        `before_commit`: the Kafka transaction of exactly-once outputs, right before the store's commit."""
        self.store = store
        self.write_versions = write_versions
        self.owner = owner
        self.max_delay_ms = max_delay_ms
        self.timeout_ms = timeout_ms
        self.on_committed = on_committed
        self.await_state = await_state
        self.on_failure = on_failure
        self.before_commit = before_commit
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="commit-upload")
        self._running: Future | None = None
        self._started = 0.0
        self._deferred: tuple[BatchPlan, list[TaskCheckpoint]] | None = None
        self._skipped: list[int] = []  # batches whose commit was folded into a later one
        self._failed: BaseException | None = None  # the first failed upload: nothing commits after it
        self.skips = 0
        self.waits = 0

    def submit(self, plan: BatchPlan, checkpoints: Iterable[TaskCheckpoint], gate: threading.Event | None = None) -> str:
        """Hand over a snapshot; returns uploading | skipped | waited. `gate`: set by the caller once the next
        batch's plan is written (or none will be): the upload's commit waits for it, at most GATE_S, so that the
        plan, which the next batch waits for, does not wait for the commit's write lock (at 4,096 virtual tasks
        a commit inserts 8,192 rows)."""
        if self._failed is not None:
            raise self._failed
        cps = list(checkpoints)
        outcome = "uploading"
        if self._running is not None and not self._running.done():
            if (time.monotonic() - self._started) * 1000 <= self.max_delay_ms:
                if self._deferred is not None:
                    self._skipped.append(self._deferred[0].batch_id)
                self._deferred = (plan, cps)
                self.skips += 1
                return "skipped"
            self.waits += 1
            outcome = "waited"
        self._wait()
        if self._deferred is not None:  # superseded by this newer snapshot
            self._skipped.append(self._deferred[0].batch_id)
            self._deferred = None
        covers, self._skipped = tuple(self._skipped), []
        self._started = time.monotonic()
        self._running = self._pool.submit(self._upload, plan, cps, covers, gate)
        return outcome

    def _upload(
        self, plan: BatchPlan, cps: list[TaskCheckpoint], covers: tuple[int, ...], gate: threading.Event | None = None
    ) -> None:
        start = time.perf_counter_ns()
        try:
            faults.point("commit.upload")  # the state uploads run meanwhile; the checkpoint waits for them
            if gate is not None:
                gate.wait(GATE_S)
            if self.await_state is not None:
                self.await_state(cps, self.timeout_ms / 1000)
            if self.before_commit is not None:
                self.before_commit(plan, cps, covers)
            self.store.commit_batch(plan, cps, self.write_versions, owner=self.owner, covers=covers)
        except BaseException as e:
            if self.on_failure is not None:
                self.on_failure(e)
            raise
        if self.on_committed:
            self.on_committed(plan, covers, time.perf_counter_ns() - start)

    def _wait(self) -> None:
        if self._running is None:
            return
        try:
            self._running.result(timeout=self.timeout_ms / 1000)  # re-raises the upload's error
        except FutureTimeout:
            self._failed = CommitTimeout(f"checkpoint upload took longer than task.commit.timeout.ms={self.timeout_ms}")
            raise self._failed from None
        except BaseException as e:
            self._failed = e
            raise
        finally:
            if self._running.done():
                self._running = None

    def flush(self) -> None:
        """Wait for the running upload, then upload what was deferred (nothing, after a failed upload)."""
        self._wait()
        if self._failed is not None:  # an earlier upload failed (raised then): the deferred batches replay after it
            self._deferred, self._skipped = None, []
            return
        if self._deferred is not None:
            plan, cps = self._deferred
            self._deferred = None
            covers, self._skipped = tuple(self._skipped), []
            self._upload(plan, cps, covers)

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._pool.shutdown(wait=True)
