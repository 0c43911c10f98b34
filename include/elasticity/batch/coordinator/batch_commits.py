"""One run's batch commits, as the driver makes them (Samza's commit of a task's checkpoint, per batch here):
the checkpoints on the upload thread behind the next batch, or now; an exactly-once outputs' transaction before
each; and as each commit lands, its metrics recorded and reported and its staged outputs deleted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence

from elasticity import faults
from elasticity.batch.coordinator.async_commit import AsyncCommitter
from elasticity.batch.sinks.exactly_once import ExactlyOnceOutputs, StagedOutput
from elasticity.batch.sinks.outputs import delete_batches
from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import JobConfig
from elasticity.jobmodel.model import TaskName
from elasticity.metrics.job_metrics import batch_metrics
from elasticity.metrics.reporters import Reporters
from elasticity.metrics.summary import BatchSummary


class BatchCommits:
    """One run's commits: each batch's checkpoints committed (on the upload thread behind the next batch, or now),
    the exactly-once outputs' transaction before each, and as each lands its metrics recorded and reported, its
    staged outputs deleted and `on_commit` told."""

    def __init__(
        self,
        *,
        store: CheckpointStore,
        config: JobConfig,
        owner: str,
        staged_outputs: Sequence[StagedOutput],
        reporters: Reporters,
        exactly_once: ExactlyOnceOutputs | None,
        await_state: Callable[[Iterable[TaskCheckpoint], float], None],
        on_failure: Callable[[BaseException], None],
        on_commit: Callable[[BatchSummary], None] | None,
    ) -> None:
        self.store, self.job, self.owner, self.on_commit = store, config.job_name, owner, on_commit
        self.staged_outputs, self.reporters = staged_outputs, reporters
        self.write_versions = config.checkpoint_write_versions
        self.timeout_s = config.commit_timeout_ms / 1000
        self.await_state = await_state
        self.by_batch: dict[int, BatchSummary] = {}
        self.exactly_once = exactly_once
        self.committer = AsyncCommitter(
            store,
            self.write_versions,
            owner,
            max_delay_ms=config.commit_max_delay_ms,
            timeout_ms=config.commit_timeout_ms,
            on_committed=self.committed,
            await_state=await_state,
            on_failure=on_failure,
            before_commit=self.before_commit,
        )

    def start(self) -> None:
        if self.exactly_once is not None:
            self.exactly_once.start()  # what earlier runs left: fenced, or rolled forward

    def submit(
        self, plan: BatchPlan, new_cps: dict[TaskName, TaskCheckpoint], summary: BatchSummary, *, planned: threading.Event
    ) -> None:
        """The batch's commit on the upload thread, once the next batch's plan is written (`planned`)."""
        self.by_batch[plan.batch_id] = summary
        summary.metrics["commit"] = self.committer.submit(plan, new_cps.values(), planned)

    def commit_now(self, plan: BatchPlan, new_cps: dict[TaskName, TaskCheckpoint], summary: BatchSummary) -> None:
        """The batch's commit on this thread, after any upload still running."""
        self.by_batch[plan.batch_id] = summary
        self.committer.flush()
        t = time.perf_counter_ns()
        self.await_state(new_cps.values(), self.timeout_s)
        self.before_commit(plan, list(new_cps.values()), ())
        self.store.commit_batch(plan, new_cps.values(), self.write_versions, owner=self.owner)
        self.committed(plan, (), time.perf_counter_ns() - t)

    def before_commit(self, plan: BatchPlan, cps: list[TaskCheckpoint], covers: tuple[int, ...]) -> None:
        if self.exactly_once is not None:
            self.exactly_once.commit(plan, cps, covers)
            for batch_id, n in self.exactly_once.refused.items():  # refused by the broker, dead-lettered
                self.by_batch[batch_id].dead_lettered += n
                self.by_batch[batch_id].outputs -= n
            faults.point("commit.kafka_committed")

    def committed(self, plan: BatchPlan, covers: tuple[int, ...], commit_ns: int) -> None:
        durable_ms = int(time.time() * 1000)  # the commit, and the batches folded into it, are durable now
        for batch_id in (*covers, plan.batch_id):
            summary = self.by_batch[batch_id]
            assert summary.generation is not None  # only a batch with nothing to read has none, and it commits nothing
            summary.metrics["commit-ns"] = commit_ns if batch_id == plan.batch_id else 0
            summary.durations_ms["commit"] = round(commit_ns / 1e6, 1) if batch_id == plan.batch_id else 0.0
            summary.metrics["commit"] = "committed" if batch_id == plan.batch_id else f"folded into batch {plan.batch_id}"
            summary.commit_at(durable_ms)
            self.store.record_metrics(self.job, batch_id, summary.generation, summary.to_json(), freshness=summary.freshness_ms)
            for staged in self.staged_outputs:  # in the Kafka topic now, with the checkpoint
                delete_batches(staged.root, [batch_id])
            if self.reporters.reporters:  # a metric per virtual task: none built for no reporter
                self.reporters.report(batch_metrics(summary))
            if self.on_commit:
                self.on_commit(summary)

    def close(self) -> None:
        try:
            self.committer.close()
        finally:
            if self.exactly_once is not None:
                self.exactly_once.close()
