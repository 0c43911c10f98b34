"""CheckpointStore, the package's facade: one store of a job's checkpoints, plans, generations, leases and
metrics over SQLAlchemy, each concern in its module, every write of checkpoints, plans and generations in the
one fenced transaction (`_fenced`; the package's docstring says how it fences)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from elasticity import faults
from elasticity.checkpoint.batch_plan import BatchPlan, BatchStatus, OffsetRange
from elasticity.checkpoint.store import (
    batch_rows,
    checkpoint_rows,
    generation_rows,
    health_rows,
    leases,
    metric_rows,
    quality_rows,
    retention,
    transactional_ids,
)
from elasticity.checkpoint.store.generation_rows import Generation
from elasticity.checkpoint.store.health_rows import AttemptFailure, EngineState
from elasticity.checkpoint.store.leases import Lease
from elasticity.checkpoint.store.quality_rows import QualityEdge, QualityRun
from elasticity.checkpoint.store.schema_upgrade import ensure_schema
from elasticity.checkpoint.store.store_engine import doing, make_engine, unavailable, unreachable
from elasticity.checkpoint.store.store_errors import StoreError
from elasticity.checkpoint.store.store_schema import (
    batch_metrics,
    rescale_metrics,
)
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.jobmodel.model import JobModel, SystemStreamPartition, TaskName

DELETE_CHUNK = 1000
"""Most rows one retention statement deletes."""
RACE_ATTEMPTS = 20
"""Tries of a write whose key another writer may take first (the next run's seq, an engine's first probe)."""

T = TypeVar("T")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _race_pause(state: RetryCallState) -> float:
    """A random pause, longer with each try, so that the writers racing for one key fall out of step."""
    return random.uniform(0, 0.01 * state.attempt_number)


class CheckpointStore:
    def __init__(self, url: str, history_size: int = 10, clock: Callable[[], int] = _now_ms) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.history_size = history_size
        self.clock = clock
        # (job, owner) -> the epoch this store took that lease at, and whether it still holds it (not released)
        self._held: dict[tuple[str, str], tuple[int, bool]] = {}
        try:  # the first connection is the store's probe: an unreachable store fails here, naming its address
            ensure_schema(self.engine)
        except OperationalError as e:
            self.engine.dispose()
            raise unreachable(url, e) from None
        except BaseException:  # a store a newer version upgraded, a failed upgrade
            self.engine.dispose()
            raise

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _connection(self, doing: str, job: Any, *, transaction: bool) -> Iterator[Connection]:
        """A connection (in a transaction: `transaction`); a server gone mid-run is a StoreUnavailable naming
        the store's address, the job and what was being done, not the driver's OperationalError."""
        try:
            with self.engine.begin() if transaction else self.engine.connect() as conn:
                yield conn
        except (OperationalError, InterfaceError) as e:
            raise unavailable(self.url, doing, job, e) from None

    def _read(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One read on a connection of its own."""
        with self._connection(f"reading {doing(read)}", args[0] if args else None, transaction=False) as conn:
            return read(conn, *args, **kwargs)

    def _write(self, write: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One unfenced write (lease, metrics, transactional ids) in a transaction of its own."""
        with self._connection(f"writing {doing(write)}", args[0] if args else None, transaction=True) as conn:
            return write(conn, *args, **kwargs)

    def _retried(self, write: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """An unfenced write that two writers may race to insert (a key both computed): the loser tries again."""
        racing = Retrying(
            retry=retry_if_exception_type(IntegrityError), stop=stop_after_attempt(RACE_ATTEMPTS), wait=_race_pause, reraise=True
        )
        return racing(self._write, write, *args, **kwargs)

    @contextmanager
    def _fenced(self, job: str, generation: int, owner: str | None, *, rescale_at: int | None = None) -> Iterator[Connection]:
        """The transaction of every write of checkpoints, plans and generations, opened by its fence: the job
        still at `generation` and no other owner holding the lease; with `rescale_at` (the rescale's time),
        the writer holding the lease, and the job moved on to the next generation. A fenced writer fails
        here (StaleGenerationError, LeaseHeldError, SupersededError) and nothing it would write is written. An
        owner that took the lease through this store is fenced by the epoch it took it at, too."""
        epoch = self.held_epoch(job, owner)
        with self._connection("committing (fenced)", job, transaction=True) as conn:
            if rescale_at is None:
                leases.fence(conn, job, generation, owner, now=self.clock(), epoch=epoch)
            else:
                leases.take_generation(conn, job, generation, owner, now=rescale_at, epoch=epoch)
            yield conn

    # --- reads -------------------------------------------------------------

    def generation(self, job: str, number: int | None = None) -> Generation | None:
        return self._read(generation_rows.read, job, number)

    def generations(self, job: str, limit: int | None = None) -> list[Generation]:
        """The job's generations, oldest first; with `limit`, only the latest that many."""
        with self._connection("reading generations", job, transaction=False) as conn:
            numbers = generation_rows.numbers(conn, job, limit)
            return [g for n in reversed(numbers) if (g := generation_rows.read(conn, job, n))]

    def checkpoints(
        self, job: str, generation: int, read_versions: tuple[int, ...] = (1,), live_max_age_ms: int = 600_000
    ) -> dict[TaskName, TaskCheckpoint]:
        return self._read(checkpoint_rows.latest, job, generation, read_versions=read_versions, live_max_age_ms=live_max_age_ms)

    def checkpoint_history(self, job: str, task_name: TaskName, version: int) -> list[TaskCheckpoint]:
        """The task's last N checkpoints (the history size), newest first."""
        return self._read(checkpoint_rows.history, job, task_name, version, limit=self.history_size)

    def pending_plan(self, job: str) -> BatchPlan | None:
        return self._read(batch_rows.pending, job)

    def plan(self, job: str, batch_id: int) -> tuple[BatchPlan, BatchStatus] | None:
        return self._read(batch_rows.plan, job, batch_id)

    def lease(self, job: str) -> Lease | None:
        return self._read(leases.lease, job, self.clock)

    def plans(self, job: str, status: BatchStatus | None = None, after: int = 0) -> list[BatchPlan]:
        """Batch plans in batch order, optionally only those with `status`, and only those after batch `after`
        (what an incremental reader has not seen: its cost by the new batches, not the job's age)."""
        return self._read(batch_rows.plans, job, status, after)

    def batches_with_status(self, job: str, status: BatchStatus) -> list[int]:
        return self._read(batch_rows.with_status, job, status)

    # --- metrics -------------------------------------------------------------

    def record_metrics(
        self, job: str, batch_id: int, generation: int, metrics_json: str, *, freshness: Mapping[str, int] | None = None
    ) -> None:
        """A batch's summary; `freshness`: its {"oldest", "newest"} freshness_ms, kept as columns too."""
        ages = metric_rows.freshness_columns(freshness)
        key = batch_metrics.c.batch_id
        self._write(
            metric_rows.put,
            batch_metrics,
            key,
            job,
            number=batch_id,
            metrics_json=metrics_json,
            now=self.clock(),
            generation=generation,
            **ages,
        )

    def metrics(self, job: str, limit: int = 100, before: int | None = None) -> list[dict]:
        """The latest batches' metrics (with `before`, of the batches below that id), oldest first."""
        return self._read(metric_rows.latest, batch_metrics, batch_metrics.c.batch_id, job, limit=limit, before=before)

    def freshness(self, job: str, *, since_ms: int) -> list[tuple[int, int]]:
        """Each batch's (oldest, newest) freshness in ms, of the batches recorded since `since_ms` (as they
        committed), in batch order; batches without one (no timestamped record) are left out."""
        return self._read(metric_rows.freshness, job, since_ms=since_ms)

    def record_rescale_metrics(self, job: str, generation: int, metrics_json: str) -> None:
        """What the rescale that wrote `generation` measured (one row per generation)."""
        key = rescale_metrics.c.generation
        self._write(metric_rows.put, rescale_metrics, key, job, number=generation, metrics_json=metrics_json, now=self.clock())

    def rescale_metrics(self, job: str, limit: int = 100, before: int | None = None) -> list[dict]:
        """The latest rescales' metrics (with `before`, of the generations below that number), oldest first."""
        return self._read(metric_rows.latest, rescale_metrics, rescale_metrics.c.generation, job, limit=limit, before=before)

    # --- data quality: its edge and its runs' index -------------------------------

    def quality_edge(self, job: str) -> QualityEdge | None:
        """Where incremental data quality stands for the job (None: never validated)."""
        return self._read(quality_rows.edge, job)

    def save_quality_edge(self, job: str, edge: QualityEdge) -> None:
        """Replace the job's edge in one transaction: the next run reads the old edge whole or the new one whole."""
        self._write(quality_rows.put_edge, job, edge, now=self.clock())

    def validated_batch(self, job: str) -> int:
        """The last batch an incremental data-quality run passed (0: none yet): what retention may expire up to."""
        return self._read(quality_rows.last_batch, job)

    def record_quality_run(self, job: str, run: QualityRun) -> int:
        """Append a finished run to the job's index (a retried run's earlier line replaced); returns its seq."""
        return self._retried(quality_rows.add_run, job, run)

    def quality_runs(self, job: str, *, limit: int, before: int | None = None) -> list[QualityRun]:
        """Up to `limit` kept runs, newest first, of those with `seq` below `before` (None: the latest)."""
        return self._read(quality_rows.runs, job, limit=limit, before=before)

    def quality_run(self, job: str, folder: str) -> QualityRun | None:
        """The kept run whose report folder is named `folder` (None: none, or removed by retention)."""
        return self._read(quality_rows.run_by_folder, job, folder)

    def expired_quality_runs(self, job: str, *, keep: int, keep_failed: int) -> list[QualityRun]:
        """The runs beyond `quality.report.retain.*`, oldest first (bounded by the runs since the last expiry)."""
        return self._read(quality_rows.expired_runs, job, keep=keep, keep_failed=keep_failed)

    def remove_quality_runs(self, job: str, seqs: Iterable[int]) -> int:
        """Remove runs from the index, DELETE_CHUNK at a time; returns how many."""
        seqs, removed = sorted(seqs), 0
        for i in range(0, len(seqs), DELETE_CHUNK):
            removed += self._write(quality_rows.remove_runs, job, seqs[i : i + DELETE_CHUNK])
        return removed

    # --- health: task attempts' failures and the engines' probes --------------------

    def record_failure(self, job: str, *, run_id: str, attempt: int, task: str, error: str) -> None:
        """A task attempt's failure in one line, for the job page (read by the API server, wherever it ran)."""
        failure = AttemptFailure(run_id=run_id, attempt=attempt, task=task, error=error, created_ms=self.clock())
        self._retried(health_rows.put_failure, job, failure)

    def last_failure(self, job: str, run_id: str, task: str | None = None) -> AttemptFailure | None:
        """The run's latest failed attempt (of `task`, if given)."""
        return self._read(health_rows.last_failure, job, run_id, task)

    def failures(self, job: str, limit: int = 20) -> list[AttemptFailure]:
        """The job's latest failed attempts (any run, any task), newest first: what the job page lists."""
        return self._read(health_rows.recent_failures, job, limit)

    def engine_probed(self, address: str, *, reachable: bool) -> EngineState:
        """Record a probe of the engine at `address`; returns since when it has answered (or not)."""
        return self._retried(health_rows.probed, address, reachable=reachable, now=self.clock())

    # --- retention: each rule deletes in statements of at most DELETE_CHUNK rows --------

    def expire_plans(self, job: str, *, before_ms: int, through_batch: int) -> int:
        """Committed and abandoned plans that ended before `before_ms`, up to `through_batch` (what data quality
        validated: its next window reads the plans after it). Never a pending plan, nor the latest one, whose id
        the next plan's is counted from."""
        return retention.expire_plans(self.engine, job, before_ms=before_ms, through_batch=through_batch, chunk=DELETE_CHUNK)

    def expire_metrics(self, job: str, *, before_ms: int) -> int:
        """Batch and rescale metrics recorded before `before_ms`, but the latest of each (the page's last batch)."""
        return retention.expire_metrics(self.engine, job, before_ms=before_ms, chunk=DELETE_CHUNK)

    def expire_transactional_ids(self, job: str, *, before_ms: int) -> int:
        """Closed transactional ids recorded before `before_ms`: no run reads them again (open ones are fenced first)."""
        return retention.expire_transactional_ids(self.engine, job, before_ms=before_ms, chunk=DELETE_CHUNK)

    def expire_failures(self, job: str, *, before_ms: int) -> int:
        """Task attempts' failures recorded before `before_ms` (the page shows only a running run's)."""
        return retention.expire_failures(self.engine, job, before_ms=before_ms, chunk=DELETE_CHUNK)

    def expire_engine_health(self, *, before_ms: int) -> int:
        """Engines not probed since `before_ms`: rows of no job's, kept as long as metrics."""
        return self._write(health_rows.expire_engines, before_ms=before_ms)

    def expire_checkpoints(self, job: str) -> int:
        """Checkpoints of the generations before the previous one: a batch reads the current generation's, a
        rescale reads the current one's to write the next, and the previous stays for the operator."""
        return retention.expire_checkpoints(self.engine, job, chunk=DELETE_CHUNK)

    def expire_generations(self, job: str, *, before_ms: int) -> int:
        """Generations written before `before_ms`, with their checkpoints, never the first (the job's identity in
        its sinks), the current or the previous one."""
        return retention.expire_generations(self.engine, job, before_ms=before_ms, chunk=DELETE_CHUNK)

    # --- lease ---------------------------------------------------------------

    def acquire_lease(self, job: str, owner: str, ttl_ms: int) -> Lease:
        """Take the job's lease at a new epoch (fails while another owner holds an unexpired one), or renew it while
        this store holds it for `owner` (SupersededError once another attempt took it since, expired or not).
        The epoch is remembered, after the release too: every fenced write by `owner` through this store must
        match it."""
        key = (job, owner)
        epoch, holding = self._held.get(key, (None, False))
        lease = leases.acquire(self.engine, job, owner, ttl_ms, clock=self.clock, epoch=epoch if holding else None)
        self._held[key] = (lease.epoch, True)
        return lease

    def want_lease(self, job: str) -> None:
        """A rescale waits for the job's lease: a run of batches holding it ends after its current batch
        (`lease_wanted`) instead of running until caught up."""
        self._write(leases.want, job, now=self.clock())

    def lease_wanted(self, job: str, within_ms: int = 15_000) -> bool:
        """A rescale asked for the lease within the last `within_ms` (a run then ends, and the lag its next)."""
        since = self._read(leases.wanted_since, job)
        return since is not None and self.clock() - since < within_ms

    def release_lease(self, job: str, owner: str) -> bool:
        """Give the lease up, if it is still this owner's at the epoch this store took it at."""
        epoch = self.held_epoch(job, owner)
        if epoch is not None:
            self._held[(job, owner)] = (epoch, False)
        return self._write(leases.release, job, owner, epoch)

    def held_epoch(self, job: str, owner: str | None) -> int | None:
        """The epoch this store last took `owner`'s lease at, held or released since (None: it took none)."""
        return None if owner is None else self._held.get((job, owner), (None, False))[0]

    def holds_lease(self, job: str, owner: str) -> bool:
        """This store took `owner`'s lease and has not released it (it may have been superseded since)."""
        return self._held.get((job, owner), (None, False))[1]

    def check_lease(self, job: str, owner: str | None) -> None:
        """Raises as a fenced write would (SupersededError, LeaseHeldError) unless the lease is still `owner`'s,
        writing nothing: what a writer checks before it deletes or moves files another attempt may own."""
        self._read(leases.check, job, owner, self.held_epoch(job, owner), now=self.clock())

    # --- batches -------------------------------------------------------------

    def plan_batch(
        self,
        job: str,
        generation: int,
        ranges: tuple[OffsetRange, ...],
        *,
        owner: str | None = None,
        after: int | None = None,
        side_inputs: tuple[tuple[SystemStreamPartition, int], ...] = (),
    ) -> BatchPlan:
        """Write the plan ahead of running it. A plan still pending is returned instead,
        so a retried batch replays exactly the same ranges; the earliest first.

        `after` chains a plan behind the latest pending one, whose commit is still
        uploading (async commit): its ranges start where that batch ends.
        """
        with self._fenced(job, generation, owner) as conn:
            latest = batch_rows.pending(conn, job, last=True)
            if latest is not None and (after is None or latest.batch_id != after):
                return batch_rows.pending(conn, job) or latest
            plan = batch_rows.insert_plan(conn, job, generation, ranges, side_inputs=side_inputs, now=self.clock())
        faults.point("plan.after_commit")
        return plan

    def commit_batch(
        self,
        plan: BatchPlan,
        task_checkpoints: Iterable[TaskCheckpoint],
        write_versions: tuple[int, ...] = (1, 2),
        *,
        owner: str | None = None,
        covers: tuple[int, ...] = (),
    ) -> None:
        """Checkpoints of every virtual task of the batch, in one transaction, fenced by generation.

        `covers` names earlier batches whose own commit was skipped (async commit):
        these checkpoints include their progress, so they are committed too. Any
        other earlier batch still pending refuses the commit: batches commit in order.
        """
        ids = (*covers, plan.batch_id)
        # built before the transaction: SQLite's write lock, which the next batch's plan waits for, is held less
        rows = checkpoint_rows.rows_of(
            plan.job_name,
            plan.generation,
            task_checkpoints,
            write_versions=write_versions,
            batch_id=plan.batch_id,
            now=self.clock(),
        )
        faults.point("commit.before_fence")
        with self._fenced(plan.job_name, plan.generation, owner) as conn:
            faults.point("commit.fenced")
            batch_rows.mark_committed(conn, plan, ids, now=self.clock())
            faults.point("commit.plan_marked")
            checkpoint_rows.insert_rows(conn, rows)
            faults.point("commit.checkpoints_written")
            if plan.batch_id % self.history_size == 0:  # amortized: a window over the generation's rows every N commits
                checkpoint_rows.prune(conn, plan.job_name, plan.generation, keep=self.history_size)
            faults.point("commit.before_commit")
        faults.point("commit.after_commit")

    # --- Kafka transactional ids (exactly-once outputs) -------------------------

    def open_transactional_ids(self, job: str) -> list[tuple[str, str]]:
        """(transactional.id, system) of the runs that may have left a transaction open, oldest first."""
        return self._read(transactional_ids.open_ids, job)

    def open_transactional_id(self, job: str, tid: str, system: str) -> None:
        """Record a run's transactional.id before it is used, so that the next run fences it whatever happens."""
        self._write(transactional_ids.record_open, job, tid, system, now=self.clock())

    def close_transactional_ids(self, job: str, tids: Iterable[str]) -> None:
        """Those ids hold no transaction any more (fenced, or their run ended cleanly)."""
        if tids := list(tids):
            self._write(transactional_ids.close, job, tids)

    # --- generations -----------------------------------------------------------

    def write_generation(
        self,
        job: str,
        expected: int,
        factor: int,
        *,
        model: JobModel,
        compute: Callable[[dict[TaskName, TaskCheckpoint]], Mapping[TaskName, TaskCheckpoint]],
        owner: str,
        reason: str,
        write_versions: tuple[int, ...] = (1, 2),
        read_versions: tuple[int, ...] = (1,),
        live_max_age_ms: int = 600_000,
        abandon_pending: bool = False,
        origin: str = "manual",
        replay: Callable[[Mapping[TaskName, TaskCheckpoint], Mapping[TaskName, TaskCheckpoint]], str] | None = None,
        decision: str | None = None,
    ) -> Generation:
        """Atomically replace generation `expected` (0: none yet) by a new one.

        `compute` gets the old generation's checkpoints, read under the row lock,
        and returns the new generation's. The caller must hold the lease. `replay`: the generation starts a
        replay, whose record (JSON) is made from the old checkpoints and the computed ones. `decision`: the
        autosizer's record (JSON) of why, kept with the generation.
        """
        now = self.clock()
        new = Generation(
            job_name=job,
            number=expected + 1,
            factor=factor,
            job_model=model,
            reason=reason,
            created_ms=now,
            origin=origin,
            decision=decision,
        )
        with self._fenced(job, expected, owner, rescale_at=now) as conn:
            faults.point("rescale.fenced")
            batch_rows.abandon_pending(conn, job, abandon=abandon_pending)
            old = (
                checkpoint_rows.latest(conn, job, expected, read_versions=read_versions, live_max_age_ms=live_max_age_ms)
                if expected
                else {}
            )
            computed = dict(compute(old))
            missing = {t.task_name for t in model.tasks()} - set(computed)
            if missing:
                raise StoreError(f"no checkpoint computed for tasks {sorted(t.name for t in missing)[:5]}")
            if replay is not None:
                new = replace(new, replay=replay(old, computed))
            generation_rows.insert_generation(conn, new)
            faults.point("rescale.generation_written")
            self._insert_checkpoints(conn, job, new.number, computed.values(), write_versions=write_versions)
            faults.point("rescale.checkpoints_written")
        faults.point("rescale.after_commit")
        return new

    def replace_checkpoints(
        self,
        job: str,
        generation: int,
        task_checkpoints: Iterable[TaskCheckpoint],
        *,
        write_versions: tuple[int, ...],
        owner: str | None,
    ) -> None:
        """The operator's overwrite (checkpoint-tool write), fenced like a commit."""
        with self._fenced(job, generation, owner) as conn:
            known = checkpoint_rows.task_names(conn, job, generation)
            task_checkpoints = list(task_checkpoints)
            unknown = sorted(cp.task_name.name for cp in task_checkpoints if cp.task_name.name not in known)
            if unknown:
                raise StoreError(f"job {job!r} generation {generation} has no tasks {unknown[:5]}; nothing was written")
            self._insert_checkpoints(conn, job, generation, task_checkpoints, write_versions=write_versions)
            checkpoint_rows.prune(conn, job, generation, keep=self.history_size)

    def _insert_checkpoints(
        self, conn: Connection, job: str, generation: int, cps: Iterable[TaskCheckpoint], *, write_versions: tuple[int, ...]
    ) -> None:
        """A rescale's or an operator's checkpoints (no batch), built inside the fenced transaction."""
        rows = checkpoint_rows.rows_of(job, generation, cps, write_versions=write_versions, batch_id=None, now=self.clock())
        checkpoint_rows.insert_rows(conn, rows)
