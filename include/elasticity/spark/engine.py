"""One micro-batch on Spark: plan -> read, route, process and sink per process slot -> commit.

On the driver, the plan: offset ranges from the virtual tasks' checkpoints (or, behind an upload still
running, the previous batch's) up to the high watermarks, written ahead to the store. Then one Spark job
of one stage, over the job's placed slots (`spark.placement`: one cached partition per process slot, so a
slot runs on the same executor batch after batch): slot i's task reads the offset chunks of the SSPs its
virtual tasks own buckets of with a Kafka consumer (assign + seek), keeps the records of its own tasks'
buckets that they have not processed yet (`batch.container.reader`), sorts them by virtual task, SSP and offset, runs
the tasks' slices on a thread pool and writes the sinks, a file per (batch, slot) (`batch.container.processing`); a
job with stores restores them first and ends with a snapshot. One summary row per virtual task comes back
to the driver, with what it read and skipped. On the driver again, the new checkpoints and their commit
(`batch.coordinator.batch_commits`); the job's lease is held all along.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from functools import cached_property, partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from elasticity import faults
from elasticity.api.stream import ApplicationDescriptor, load_application
from elasticity.batch.container.process_context import (
    ProcessContext,
    batch_state,
    create_output_topics,
    process_context,
    slot_of,
    slot_reads,
    table_batch,
)
from elasticity.batch.container.processing import SUMMARY_SCHEMA, run_slots
from elasticity.batch.container.reader import SlotReads
from elasticity.batch.coordinator.batch_commits import BatchCommits
from elasticity.batch.coordinator.behind import DoneAhead, after_batch, carried
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.coordinator.lag import done_ahead
from elasticity.batch.coordinator.lease import LeaseHeartbeat, held_lease
from elasticity.batch.coordinator.log_bounds import checked, lost_ranges
from elasticity.batch.coordinator.outcome import TaskSummary, batch_summary, count_records, new_checkpoints, summary_metrics
from elasticity.batch.coordinator.planning import plan_ranges
from elasticity.batch.sinks.exactly_once import ExactlyOnceOutputs, StagedOutput, exactly_once_outputs, staged_outputs
from elasticity.batch.sinks.outputs import delete_batches, output_roots
from elasticity.batch.sinks.sink_identity import guard_sinks
from elasticity.checkpoint.batch_plan import BatchPlan, BatchStatus
from elasticity.checkpoint.store import CheckpointStore, Generation
from elasticity.checkpoint.store.attempt_token import attempt_owner
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import BLOB_STORE_FACTORY, JobConfig
from elasticity.config.runtime_rules import check_shared_paths
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.kafka.consumer import HeldKafkaInputs, KafkaInputs
from elasticity.metrics.reporters import Reporters
from elasticity.metrics.summary import BatchSummary
from elasticity.spark.placement import placed_slots, rebalance
from elasticity.spark.session import check_master, spark_master
from elasticity.spark.shipping import ship_user_code
from elasticity.state.backends.blob_manager import BlobStoreManager
from elasticity.state.backends.blobstore import await_durable
from elasticity.state.store_config import StorageConfig
from elasticity.state.table import SideInputBatch, TableSource, resolve_tables
from elasticity.state.worker import BatchState

log = logging.getLogger(__name__)
RECENT_BATCHES = 10  # the executors these used are the ones a job's slots should spread over
SUMMARY_TYPE = from_arrow_schema(SUMMARY_SCHEMA)  # a type, not DDL: Spark Connect parses DDL in a call of its own


class BatchFailed(RuntimeError):
    """Some virtual tasks stopped on a bad record (task.dead.letter.policy=fail); the rest committed."""


def default_batch_owner() -> str:
    """A run outside Airflow: `batch@host:pid` and a random part, an attempt of its own (`attempt_token`)."""
    return attempt_owner(f"batch@{socket.gethostname()}:{os.getpid()}")


class MicroBatchEngine:
    def __init__(
        self, config: JobConfig, spark: SparkSession, store: CheckpointStore | None = None, inputs: KafkaInputs | None = None
    ) -> None:
        self.config = config
        self.spark = spark
        self.store = store or CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size)
        # inputs of its own keep one client for every batch's offsets (closed as a run ends), not one per call
        self.inputs = inputs or HeldKafkaInputs(config)
        self._own_inputs = inputs is None
        self.reporters = Reporters.of(config)
        self.coordinator = JobCoordinator(config, self.store, self.inputs, self.reporters)
        self.job = config.job_name
        self._placed: tuple[int, DataFrame] | None = None
        self._recent_executors: deque[set[str]] | None = None  # the executors of the job's recent batches
        self._planned: threading.Event | None = None  # the running upload's gate: set once the next plan is written
        self._done: DoneAhead | None = None  # the records behind's count after the last batch run (coordinator.behind)
        self._frozen = False
        self._log_start: dict[SystemStreamPartition, int] = {}  # read with the high watermarks, for the next plan

    def _freeze_long_lived(self) -> None:
        """After the engine's first batch, what is alive is frozen out of the cyclic GC (after a collection): the
        job model, its virtual tasks' names and SSPs, the client's and the store's caches. At 4,096 virtual tasks
        they were some 150,000 objects, and each batch's new checkpoints set off a full collection over them
        every batch or two, 40-65 ms in the middle of a batch. Frozen objects are still freed when the last
        reference goes (the checkpoints the next batch replaces); only a cycle among them would stay, hence once
        per engine, after a collection."""
        if not self._frozen:
            self._frozen = True
            gc.collect()
            gc.freeze()

    @cached_property
    def app(self) -> ApplicationDescriptor:
        ship_user_code(self.spark, self.config)  # spark.submit.pyFiles on the driver's path before the app imports them
        return load_application(
            self.config.app_class, self.config.inputs
        )  # on the driver too: a bad app.class fails before any work

    @cached_property
    def _local_master(self) -> bool:
        """Every slot runs on this host (local[N]): a slot's task may claim the slot its Python worker holds."""
        return spark_master(self.spark).startswith("local")

    @cached_property
    def storage(self) -> StorageConfig | None:
        """The stores of a stateful app, as the job configures them (None: a stateless app)."""
        return StorageConfig.of(self.config, list(self.app.stores.values())) if self.app.stores else None

    @cached_property
    def staged_outputs(self) -> tuple[StagedOutput, ...]:
        return staged_outputs(self.config, self.app)

    def _exactly_once(self, owner: str) -> ExactlyOnceOutputs | None:
        return exactly_once_outputs(self.config, self.app, staged=self.staged_outputs, store=self.store, owner=owner)

    @cached_property
    def tables(self) -> tuple[TableSource, ...]:
        """The app's tables and their side inputs, as the job configures them."""
        return resolve_tables(self.config, self.app.tables)

    def _side_input_offsets(self) -> tuple[tuple[SystemStreamPartition, int], ...]:
        """Every side-input partition's high watermark now: what a new batch's tables are read up to."""
        streams = sorted({s for t in self.tables for s in t.streams})
        if not streams:
            return ()
        counts = self.inputs.partition_counts(streams)
        ssps = [SystemStreamPartition(s.system, s.stream, p) for s in streams for p in range(counts[s])]
        return tuple(sorted(self.inputs.offsets(ssps, "upcoming").items()))

    def _table_batch(self, plan: BatchPlan) -> SideInputBatch | None:
        """The tables of a batch, read up to the offsets recorded with its plan (a plan written before the
        app had tables records none: read up to now)."""
        if not self.tables:
            return None
        return table_batch(self.config, self.tables, dict(plan.side_inputs) or dict(self._side_input_offsets()))

    def _await_state(self, cps: Iterable[TaskCheckpoint], timeout_s: float) -> None:
        """Before a checkpoint is written: its blob-store snapshots, uploading in the workers, are durable."""
        markers = [cp.state_markers for cp in cps if BLOB_STORE_FACTORY in cp.state_markers]
        if markers:
            await_durable(self._blobs, markers, timeout_s)

    def _cancel_running(self, error: BaseException) -> None:
        """A commit failed while the next batch runs (its snapshot upload was lost with an executor, say):
        that batch started from the failed one's snapshot and cannot commit either, and its tasks would wait
        for that snapshot until they give up; stop it now. The run then fails with the commit's error."""
        log.warning("commit failed (%s): cancelling the batch running behind it", error)
        with contextlib.suppress(Exception):
            if type(self.spark).__module__.startswith("pyspark.sql.connect"):
                self.spark.interruptAll()
            else:
                self.spark.sparkContext.cancelAllJobs()

    def _factories(self) -> set[str]:
        assert self.storage is not None
        return {f for st in self.storage.stores for f in st.backup_factories + st.restore_factories}

    @cached_property
    def _blobs(self) -> BlobStoreManager:
        assert self.storage is not None
        return BlobStoreManager(self.storage.blob_uri)

    # --- public ---------------------------------------------------------------

    def run(
        self,
        max_records: int | None = None,
        *,
        until_caught_up: bool = False,
        owner: str | None = None,
        max_seconds: float | None = None,
        on_commit: Callable[[BatchSummary], None] | None = None,
        reset_sinks: bool = False,
    ) -> list[BatchSummary]:
        """One batch (after a failed run: every batch it left planned, replayed in order), or
        batches until no lag is left or `max_seconds` have passed (no new batch starts after
        that). In the loop, each commit's upload overlaps the next batch (async commit); a
        single batch commits synchronously. `on_commit` hears of each batch as its commit
        lands (from the upload thread, for async commits)."""
        owner = owner or default_batch_owner()
        cap = self.config.batch_max_records if max_records is None else max_records
        self._check_cluster()
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        # the heartbeat spans everything done under the lease, the last upload too; it stops before the release
        with held_lease(self.store, self.job, owner, self.config.lease_ttl_ms, wait_s=self.config.lease_wait_ms / 1000) as lease:
            commits = BatchCommits(
                store=self.store,
                config=self.config,
                owner=owner,
                staged_outputs=self.staged_outputs,
                reporters=self.reporters,
                exactly_once=self._exactly_once(owner),
                await_state=self._await_state,
                on_failure=self._cancel_running,
                on_commit=on_commit,
            )
            try:
                commits.start()
                # job identity: sinks written under another store fail the start (elasticity.batch.sinks.sink_identity)
                guard_sinks(self.config, self.store, lambda: self.coordinator.initialize(owner, settled=True), reset=reset_sinks)
                summaries = self._batches(lease, commits, cap, until_caught_up=until_caught_up, deadline=deadline)
                self._open_gate()  # no next plan
                commits.committer.flush()
            finally:
                self._open_gate()
                commits.close()
                if self._own_inputs and isinstance(self.inputs, HeldKafkaInputs):
                    self.inputs.close()
        return summaries

    def _check_cluster(self) -> None:
        """Before the lease: the master is up, and the paths the executors share are shared."""
        master = spark_master(self.spark)
        check_master(master)  # a Connect server whose master is down: fail now, naming it
        check_shared_paths(self.config, master, blobs=self.storage is not None and BLOB_STORE_FACTORY in self._factories())

    def _batches(
        self, lease: LeaseHeartbeat, commits: BatchCommits, cap: int, *, until_caught_up: bool, deadline: float | None
    ) -> list[BatchSummary]:
        """Batch after batch under the lease: one (and the chain a failed run left planned), or until no lag
        is left or the deadline has passed. A batch in the loop commits on the upload thread while the next
        one runs; a single or replayed batch, or one with errors, commits now."""
        summaries: list[BatchSummary] = []
        snapshot: tuple[BatchPlan, dict[TaskName, TaskCheckpoint]] | None = None
        high = None
        while True:
            lease.check()  # no batch is started that its commit would be fenced from
            summary, plan, new_cps, high = self.run_one(cap, commits.owner, snapshot, high)
            self._freeze_long_lived()
            summary.owner = commits.owner
            summaries.append(summary)
            if plan is None:
                break
            if until_caught_up and not summary.replayed and not summary.errors:
                # the upload's commit waits for the next batch's plan (set in run_one): the plan goes first
                self._planned = threading.Event()
                commits.submit(plan, new_cps, summary, planned=self._planned)
                snapshot = (plan, new_cps)
            else:
                commits.commit_now(plan, new_cps, summary)
                snapshot = None
            if summary.errors:
                raise BatchFailed("; ".join(summary.errors))
            if summary.replayed and self.store.pending_plan(self.job) is not None:
                continue  # a failed run's whole chain of planned batches replays, in order, in one run
            out_of_time = deadline is not None and time.monotonic() >= deadline  # or a rescale waits for the lease:
            if not until_caught_up or summary.lag_left == 0 or out_of_time or self.store.lease_wanted(self.job):
                break
        return summaries

    def run_one(
        self,
        max_records: int,
        owner: str,
        snapshot: tuple[BatchPlan, dict[TaskName, TaskCheckpoint]] | None = None,
        high: dict[SystemStreamPartition, int] | None = None,
    ) -> tuple[BatchSummary, BatchPlan | None, dict[TaskName, TaskCheckpoint], dict[SystemStreamPartition, int]]:
        """Plan, read, route, process and sink one batch; returns the new checkpoints to commit and the
        high watermarks read after it.

        With `snapshot` (the previous batch, its commit still uploading) the plan
        starts from those checkpoints and is chained behind that batch, up to `high`
        (the high watermarks read as that batch ended) where they cover its inputs.
        """
        t0 = time.perf_counter()
        generation, cps, pending = self._start(owner, snapshot)
        after = snapshot[0].batch_id if snapshot else None
        plan, high = self._plan(generation, cps, pending, max_records=max_records, owner=owner, after=after, high=high)
        self._open_gate()
        done = self._done_before(generation, cps, chained=snapshot is not None)
        if plan is None:
            summary = batch_summary(
                self.job, generation, None, cps, high=high, durations={"plan": _ms(t0)}, metrics={}, done=done
            )
            return summary, None, cps, high
        self._clean_batch(owner, *self.store.batches_with_status(self.job, BatchStatus.ABANDONED))
        durations = {"plan": _ms(t0)}
        if lost := lost_ranges(cps, plan):
            log.warning(
                "%s batch %d: records removed from the log before they were processed, declared lost "
                "(task.input.truncation.policy=skip-to-earliest): %s",
                self.job,
                plan.batch_id,
                "; ".join(r.describe() for r in lost),
            )

        t = time.perf_counter()
        rows = self._read_and_process(plan, generation, cps, epoch=self.store.held_epoch(self.job, owner))
        durations["spark"] = _ms(t)
        durations["read"] = round(max((r.read_ns for r in rows), default=0) / 1e6, 1)
        durations["process"] = round(max((r.group_ns - r.read_ns for r in rows), default=0) / 1e6, 1)

        t = time.perf_counter()
        new_cps = new_checkpoints(plan, cps, rows, stateful=self.storage is not None)
        durations["checkpoint"] = _ms(t)  # the batch's new checkpoints (SEP-32's checkpoint-compute-ns is a rescale's)

        metrics = summary_metrics(durations, new_cps, rows, stateful=self.storage is not None)
        high = self._high_watermarks(plan)
        done = self._done = after_batch(done, sum(r.kept for r in rows), new_cps.values(), lost=bool(lost))
        summary = batch_summary(self.job, generation, plan, new_cps, high=high, durations=durations, metrics=metrics, done=done)
        count_records(summary, rows)
        summary.lost = [r.to_json() for r in lost]
        summary.replayed = pending is not None
        summary.durations_ms["total"] = _ms(t0)
        summary.finished_ms = int(time.time() * 1000)
        return summary, plan, new_cps, high

    def _done_before(self, generation: Generation, cps: dict[TaskName, TaskCheckpoint], *, chained: bool) -> DoneAhead:
        """The records above the slowest tasks already processed, as a batch starts: a chained batch counts on from
        the one before it (its commit still uploading), any other from the store's last committed batch."""
        if chained:
            return carried(self._done, cps.values())
        return done_ahead(self.store, self.job, generation.number, cps.values())

    def _open_gate(self) -> None:
        """The previous batch's upload may commit now: the next plan is written, or none will be."""
        if self._planned is not None:
            self._planned.set()
            self._planned = None

    # --- steps of a batch ------------------------------------------------------

    def _start(
        self,
        owner: str,
        snapshot: tuple[BatchPlan, dict[TaskName, TaskCheckpoint]] | None,
    ) -> tuple[Generation, dict[TaskName, TaskCheckpoint], BatchPlan | None]:
        """The generation and checkpoints the batch starts from, and the plan it must replay (a batch that
        failed before its commit: its ranges exactly). Behind an upload still running, that batch's
        checkpoints under the same generation; otherwise the committed ones, after a new generation if
        input partitions were added. Each batch's log says so when the config names another factor."""
        if snapshot is not None:
            previous, cps = snapshot
            generation = self.coordinator.current()
            assert generation is not None and generation.number == previous.generation
            self.coordinator.warn_unread_factor(generation)
            return generation, cps, None
        generation = self.coordinator.current()
        pending = self.store.pending_plan(self.job) if generation else None
        if pending is None:
            # also picks up new input partitions: a new generation records its own metrics (rescale)
            generation = self.coordinator.initialize(owner, settled=True)  # this run settled at its start
        assert generation is not None
        self.coordinator.warn_unread_factor(generation)
        return generation, self.coordinator.checkpoints(generation), pending

    def _plan(
        self,
        generation: Generation,
        cps: dict[TaskName, TaskCheckpoint],
        pending: BatchPlan | None,
        *,
        max_records: int,
        owner: str,
        after: int | None,
        high: dict[SystemStreamPartition, int] | None = None,
    ) -> tuple[BatchPlan | None, dict[SystemStreamPartition, int]]:
        """The batch's plan, written ahead of running it so that a retry replays the same ranges: the pending
        one (whatever its failed attempt wrote is removed first), or ranges from the checkpoints up to the high
        watermarks, at most `max_records`. None with the high watermarks when there is nothing to read.
        Chained behind the batch that just ended, the high watermarks read as it ended serve (one ListOffsets
        less between batches; what arrived since goes to the next batch)."""
        if pending is not None:
            self._clean_batch(owner, pending.batch_id)
            faults.point("replay.cleaned")
            return pending, {}
        bases = sorted({s.without_key_bucket() for cp in cps.values() for s in cp.offsets})
        if after is None or high is None or not set(bases) <= high.keys() or not set(bases) <= self._log_start.keys():
            self._log_start, high = self.inputs.bounds(bases)
        from_cps = checked(cps, self._log_start, high, self.config.input_truncation_policy)
        ranges = plan_ranges(from_cps.values(), high, max_records)
        if sum(r.size for r in ranges) == 0:
            return None, high
        return self.store.plan_batch(
            self.job, generation.number, ranges, owner=owner, after=after, side_inputs=self._side_input_offsets()
        ), high

    def _read_and_process(
        self, plan: BatchPlan, generation: Generation, cps: dict[TaskName, TaskCheckpoint], *, epoch: int | None
    ) -> list[TaskSummary]:
        """One Spark job of one stage over the placed slots: each slot reads, routes and processes its own
        records, its files named by the attempt's `epoch`. Returns each virtual task's summary row."""
        slots = len(generation.job_model.containers) * self.config.container_process_count
        work = partial(run_slots, self._context(plan, generation, cps, epoch), self._slot_reads(plan, generation, cps))
        if self._placed is None or self._placed[0] != slots:
            self._placed = slots, placed_slots(self.spark, slots)  # its cache checked once per engine (a call on Connect)
        rows = TaskSummary.of(self._placed[1].mapInArrow(work, SUMMARY_TYPE).toArrow())
        used = {r.executor for r in rows}
        if self._recent_executors is None:  # read once per engine: at thousands of virtual tasks a batch's metrics are large
            self._recent_executors = deque(
                (set(m["metrics"].get("executors", ())) for m in self.store.metrics(self.job, limit=RECENT_BATCHES)),
                maxlen=RECENT_BATCHES,
            )
        if rebalance(self.spark, slots, used, set().union(*self._recent_executors)):
            self._placed = None
        self._recent_executors.append(used)
        return rows

    def _high_watermarks(self, plan: BatchPlan) -> dict[SystemStreamPartition, int]:
        """Each planned SSP's high watermark after the batch, for the lag left (the plan's end if the broker says nothing)."""
        high = {r.ssp: r.end for r in plan.ranges}
        log_start, found = self.inputs.bounds(list(high))
        self._log_start.update(log_start)  # the next batch, chained behind this one, plans from both
        high.update(found)
        return high

    # --- placement ---------------------------------------------------------------

    def _slot_reads(self, plan: BatchPlan, generation: Generation, cps: dict[TaskName, TaskCheckpoint]) -> SlotReads:
        slots = slot_of(generation.job_model, self.config.container_process_count)
        return slot_reads(self.config, plan, generation, cps, slots=slots)

    def _context(
        self, plan: BatchPlan, generation: Generation, cps: dict[TaskName, TaskCheckpoint], epoch: int | None
    ) -> ProcessContext:
        create_output_topics(self.config, self.app, self.inputs)
        local = self._local_master
        return process_context(
            self.config,
            self.app,
            plan.batch_id,
            slots=len(generation.job_model.containers) * self.config.container_process_count,
            state=self._batch_state(generation, cps),
            tables=self._table_batch(plan),
            stage_kafka=bool(self.staged_outputs),
            slot_claims=uuid.uuid4().hex if local and (self.storage is not None or self.tables) else None,
            shipped=ship_user_code(self.spark, self.config),  # each batch: a changed app is the next batch's
            epoch=epoch,
            generation=generation.number,
        )

    def _batch_state(self, generation: Generation, cps: dict[TaskName, TaskCheckpoint]) -> BatchState | None:
        if self.storage is None:
            return None
        slots = slot_of(generation.job_model, self.config.container_process_count)
        return batch_state(self.storage, generation, cps, written=self.coordinator.checkpoints(generation), slots=slots)

    def _clean_batch(self, owner: str, *batch_ids: int) -> None:
        """Delete what earlier attempts wrote of batches that replay (or never commit): only once the store says
        the lease is still this attempt's (SupersededError otherwise), and only files of its epoch or below, never
        a later attempt's."""
        if not batch_ids:
            return
        self.store.check_lease(self.job, owner)
        epoch = self.store.held_epoch(self.job, owner)
        c = self.config
        roots = [c.audit_dir, c.dead_letter_dir]
        roots += output_roots(c.output_dir) + [o.root for o in self.staged_outputs]
        for root in roots:
            delete_batches(root, batch_ids, through_epoch=epoch)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)
