"""The checkpoint store: SQL through SQLAlchemy (SQLite embedded, PostgreSQL in production).

It keeps, per job: the JobModel generations (factor and model of each), each
virtual task's checkpoint history (the last N per version; a commit in N prunes
what is older, so a task holds at most 2N - 1 rows), the write-ahead batch plans,
and a lease with expiry. The `expire_*` methods are the retention rules (run by
`elasticity.maintenance`): each deletes in statements of at most DELETE_CHUNK rows.

Every write opens with an UPDATE of the job row guarded by the generation the
writer planned under. That statement both fences (a stale writer matches no
row, fails, and changes nothing) and takes the row lock, so everything read
after it in the same transaction is current. All tasks of a batch, or of a
rescale, are written in that one transaction.
"""

from __future__ import annotations

import functools
import json
import operator
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    and_,
    create_engine,
    delete,
    event,
    func,
    insert,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.pool import StaticPool

from elasticity import faults
from elasticity.checkpoint.batch_plan import BatchPlan, OffsetRange
from elasticity.checkpoint.serde import (
    offsets_json,
    v1_from_json,
    v2_from_json,
    v2_json,
    watermarks_from_json,
    watermarks_to_json,
)
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint
from elasticity.checkpoint.versions import Candidate, choose
from elasticity.jobmodel.model import JobModel, SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import job_model_from_json, job_model_to_json, ssp_from_key, ssp_to_key

metadata = MetaData()

jobs = Table(
    "elasticity_jobs",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("generation", Integer, nullable=False),  # 0: no generation yet
    Column("lease_owner", String(255)),
    Column("lease_expires_ms", BigInteger),
    Column("updated_ms", BigInteger, nullable=False),
)

generations = Table(
    "elasticity_generations",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("factor", Integer, nullable=False),
    Column("job_model", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("origin", String(32)),  # who asked: manual | schedule | autosize | start | partitions
)

checkpoints = Table(
    "elasticity_checkpoints",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("job_name", String(255), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("task_name", String(1024), nullable=False),
    Column("version", SmallInteger, nullable=False),
    Column("payload", Text, nullable=False),  # Samza's CheckpointV1 / CheckpointV2 JSON
    Column("watermarks", Text),
    Column("batch_id", BigInteger),
    Column("created_ms", BigInteger, nullable=False),
    Index("ix_elasticity_checkpoints_task", "job_name", "generation", "task_name", "version", "id"),
)

CHECKPOINT_COLUMNS = ("job_name", "generation", "task_name", "version", "payload", "watermarks", "batch_id", "created_ms")

batches = Table(
    "elasticity_batches",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("batch_id", BigInteger, primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("ranges", Text, nullable=False),
    Column("side_inputs", Text),  # JSON [[ssp key, read-up-to offset], ...] of the tables' side inputs
    Column("status", String(16), nullable=False),  # planned | committed | abandoned
    Column("planned_ms", BigInteger, nullable=False),
    Column("committed_ms", BigInteger),
)


batch_metrics = Table(
    "elasticity_batch_metrics",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("batch_id", BigInteger, primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("metrics", Text, nullable=False),  # JSON: the batch summary and SEP-32's metrics
    # the summary's freshness_ms, as columns: the job page's percentiles over an hour read no JSON
    Column("freshness_oldest_ms", BigInteger),
    Column("freshness_newest_ms", BigInteger),
    Index("ix_elasticity_batch_metrics_created", "job_name", "created_ms"),
)

rescale_metrics = Table(
    "elasticity_rescale_metrics",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("metrics", Text, nullable=False),  # JSON: SEP-32's job-model-generation-ns and checkpoint-compute-ns of the rescale
)

transactions = Table(  # each run's Kafka transactional.id, written before the run uses it (exactly-once outputs)
    "elasticity_transactions",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("transactional_id", String(512), primary_key=True),
    Column("system", String(255), nullable=False),  # the Kafka system the run's outputs and commit records go to
    Column("state", String(16), nullable=False),  # open: may hold a transaction | closed: fenced or ended cleanly
    Column("created_ms", BigInteger, nullable=False),
)


class StoreError(RuntimeError):
    pass


class StaleGenerationError(StoreError):
    """A writer planned under a generation that is no longer current."""


class LeaseHeldError(StoreError):
    pass


class BatchStateError(StoreError):
    pass


class PendingBatchError(StoreError):
    pass


@dataclass(frozen=True, kw_only=True)
class Generation:
    job_name: str
    number: int
    factor: int
    job_model: JobModel
    reason: str
    created_ms: int
    origin: str = "manual"  # manual (a person: the rescale DAG or CLI), schedule, autosize, start, partitions


@dataclass(frozen=True)
class Lease:
    job_name: str
    owner: str
    expires_ms: int


@functools.lru_cache(maxsize=16)
def _job_model(text: str) -> JobModel:
    """A generation's job model, decoded once per process: it never changes, and at thousands of virtual
    tasks decoding it took longer than planning the batch it is read for."""
    return job_model_from_json(text)


def _now_ms() -> int:
    return int(time.time() * 1000)


CONNECT_TIMEOUT_S = 5
DELETE_CHUNK = 1000
"""Most rows one retention statement deletes."""


def make_engine(url: str) -> Engine:
    if url in ("sqlite://", "sqlite:///:memory:"):
        return create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    if url.startswith("sqlite"):
        if database := make_url(url).database:  # the default under a new project's $ELASTICITY_HOME, not made yet
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")  # readers do not block the committing writer
            cur.execute("PRAGMA synchronous=FULL")  # a commit survives power loss, as a checkpoint must
            cur.close()

        return engine
    # a server that accepts and never answers fails the connection here, instead of hanging for minutes
    return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT_S})


def masked(url: str) -> str:
    """The URL as logs and errors may show it: no password."""
    return make_url(url).render_as_string(hide_password=True)


def _ranges_to_json(ranges: Iterable[OffsetRange]) -> str:
    return json.dumps([[ssp_to_key(r.ssp), r.start, r.end] for r in ranges])


def _ranges_from_json(text_: str) -> tuple[OffsetRange, ...]:
    return tuple(OffsetRange(ssp_from_key(k), int(s), int(e)) for k, s, e in json.loads(text_))


def _side_inputs_from_json(text_: str | None) -> tuple[tuple[SystemStreamPartition, int], ...]:
    return tuple((ssp_from_key(k), int(o)) for k, o in json.loads(text_)) if text_ else ()


SCHEMA_ATTEMPTS = 5


def _racing_other_openers(create: Callable[[], None]) -> None:
    """Runs a schema step that checks, then creates. Processes opening a new store at once (the triggers of
    several jobs, a DAG run beside the job page) race between the check and the create; the loser's error
    ("already exists", a duplicate in PostgreSQL's catalog) means the winner made it: look again."""
    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            create()
            return
        except DBAPIError as e:
            lost = any(m in str(e.orig or e).lower() for m in ("already exists", "duplicate"))
            if not lost or attempt == SCHEMA_ATTEMPTS:
                raise
            time.sleep(0.02 * attempt)


class CheckpointStore:
    def __init__(self, url: str, history_size: int = 10, clock: Callable[[], int] = _now_ms) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.history_size = history_size
        self.clock = clock
        try:  # the first connection is the store's probe: an unreachable store fails here, naming its address
            _racing_other_openers(lambda: metadata.create_all(self.engine))
            _racing_other_openers(self._add_missing_columns)
        except OperationalError as e:
            self.engine.dispose()
            reason = str(e.orig or e).strip().splitlines()[0] if str(e.orig or e).strip() else type(e).__name__
            raise StoreError(
                f"checkpoint store unreachable at {masked(url)} (task.checkpoint.store.url / ELASTICITY_CHECKPOINT_STORE_URL): {reason}"
            ) from None

    def _add_missing_columns(self) -> None:
        """Stores written by an older version lack later nullable columns; add them in place."""
        have = {c["name"] for c in inspect(self.engine).get_columns(generations.name)}
        if "origin" not in have:
            with self.engine.begin() as conn:
                conn.execute(text(f"ALTER TABLE {generations.name} ADD COLUMN origin VARCHAR(32)"))
        if "side_inputs" not in {c["name"] for c in inspect(self.engine).get_columns(batches.name)}:
            with self.engine.begin() as conn:
                conn.execute(text(f"ALTER TABLE {batches.name} ADD COLUMN side_inputs TEXT"))
        if "freshness_oldest_ms" not in {c["name"] for c in inspect(self.engine).get_columns(batch_metrics.name)}:
            with self.engine.begin() as conn:
                for column in ("freshness_oldest_ms", "freshness_newest_ms"):
                    conn.execute(text(f"ALTER TABLE {batch_metrics.name} ADD COLUMN {column} BIGINT"))
                for index in batch_metrics.indexes:
                    index.create(conn, checkfirst=True)

    def close(self) -> None:
        self.engine.dispose()

    # --- reads -------------------------------------------------------------

    def generation(self, job: str, number: int | None = None) -> Generation | None:
        with self.engine.connect() as conn:
            if number is None:
                number = conn.execute(select(jobs.c.generation).where(jobs.c.job_name == job)).scalar()
                if not number:
                    return None
            row = conn.execute(
                select(generations).where(generations.c.job_name == job, generations.c.generation == number)
            ).first()
        if row is None:
            return None
        return Generation(
            job_name=job,
            number=row.generation,
            factor=row.factor,
            job_model=_job_model(row.job_model),
            reason=row.reason,
            created_ms=row.created_ms,
            origin=row.origin or "manual",
        )

    def generations(self, job: str, limit: int | None = None) -> list[Generation]:
        """The job's generations, oldest first; with `limit`, only the latest that many."""
        query = select(generations.c.generation).where(generations.c.job_name == job).order_by(generations.c.generation.desc())
        with self.engine.connect() as conn:
            numbers = list(conn.execute(query if limit is None else query.limit(limit)).scalars())
        return [g for n in reversed(numbers) if (g := self.generation(job, n))]

    def checkpoints(
        self, job: str, generation: int, read_versions: tuple[int, ...] = (1,), live_max_age_ms: int = 600_000
    ) -> dict[TaskName, TaskCheckpoint]:
        with self.engine.connect() as conn:
            return self._read_checkpoints(conn, job, generation, read_versions=read_versions, live_max_age_ms=live_max_age_ms)

    def checkpoint_history(self, job: str, task_name: TaskName, version: int) -> list[TaskCheckpoint]:
        """The task's last N checkpoints (the history size), newest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(checkpoints)
                .where(checkpoints.c.job_name == job, checkpoints.c.task_name == task_name.name, checkpoints.c.version == version)
                .order_by(checkpoints.c.id.desc())
                .limit(self.history_size)
            ).all()
        return [self._decode(r) for r in rows]

    def pending_plan(self, job: str) -> BatchPlan | None:
        with self.engine.connect() as conn:
            return self._pending(conn, job)

    def plan(self, job: str, batch_id: int) -> tuple[BatchPlan, str] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(batches).where(batches.c.job_name == job, batches.c.batch_id == batch_id)).first()
        return (self._plan(row), row.status) if row else None

    def lease(self, job: str) -> Lease | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
        if row is None or row.lease_owner is None or row.lease_expires_ms < self.clock():
            return None
        return Lease(job, row.lease_owner, row.lease_expires_ms)

    def plans(self, job: str, status: str | None = None, after: int = 0) -> list[BatchPlan]:
        """Batch plans in batch order, optionally only those with `status`, and only those after batch `after`
        (what an incremental reader has not seen: its cost by the new batches, not the job's age)."""
        query = select(batches).where(batches.c.job_name == job, batches.c.batch_id > after).order_by(batches.c.batch_id)
        if status:
            query = query.where(batches.c.status == status)
        with self.engine.connect() as conn:
            return [self._plan(r) for r in conn.execute(query)]

    def batches_with_status(self, job: str, status: str) -> list[int]:
        with self.engine.connect() as conn:
            return list(
                conn.execute(select(batches.c.batch_id).where(batches.c.job_name == job, batches.c.status == status)).scalars()
            )

    def record_metrics(
        self, job: str, batch_id: int, generation: int, metrics_json: str, *, freshness: Mapping[str, int] | None = None
    ) -> None:
        """A batch's summary; `freshness`: its {"oldest", "newest"} freshness_ms, kept as columns too."""
        ages = {"freshness_oldest_ms": freshness["oldest"], "freshness_newest_ms": freshness["newest"]} if freshness else {}
        self._put_metrics(
            batch_metrics,
            batch_metrics.c.batch_id,
            job,
            number=batch_id,
            metrics_json=metrics_json,
            generation=generation,
            **ages,
        )

    def metrics(self, job: str, limit: int = 100, before: int | None = None) -> list[dict]:
        """The latest batches' metrics (with `before`, of the batches below that id), oldest first."""
        return self._latest_metrics(batch_metrics, batch_metrics.c.batch_id, job, limit=limit, before=before)

    def freshness(self, job: str, *, since_ms: int) -> list[tuple[int, int]]:
        """Each batch's (oldest, newest) freshness in ms, of the batches recorded since `since_ms` (as they
        committed), in batch order; batches without one (no timestamped record) are left out."""
        t = batch_metrics.c
        query = (
            select(t.freshness_oldest_ms, t.freshness_newest_ms)
            .where(t.job_name == job, t.created_ms >= since_ms, t.freshness_oldest_ms.is_not(None))
            .order_by(t.batch_id)
        )
        with self.engine.connect() as conn:
            return [(int(o), int(n)) for o, n in conn.execute(query)]

    def record_rescale_metrics(self, job: str, generation: int, metrics_json: str) -> None:
        """What the rescale that wrote `generation` measured (one row per generation)."""
        self._put_metrics(rescale_metrics, rescale_metrics.c.generation, job, number=generation, metrics_json=metrics_json)

    def rescale_metrics(self, job: str, limit: int = 100, before: int | None = None) -> list[dict]:
        """The latest rescales' metrics (with `before`, of the generations below that number), oldest first."""
        return self._latest_metrics(rescale_metrics, rescale_metrics.c.generation, job, limit=limit, before=before)

    def _put_metrics(self, table: Table, key: Column, job: str, *, number: int, metrics_json: str, **extra: int) -> None:
        """One row per job and batch (or generation), replaced when recorded again."""
        with self.engine.begin() as conn:
            conn.execute(delete(table).where(table.c.job_name == job, key == number))
            conn.execute(
                insert(table).values(job_name=job, **{key.name: number}, **extra, created_ms=self.clock(), metrics=metrics_json)
            )

    def _latest_metrics(self, table: Table, key: Column, job: str, *, limit: int, before: int | None) -> list[dict]:
        query = select(table.c.metrics).where(table.c.job_name == job).order_by(key.desc()).limit(limit)
        if before is not None:
            query = query.where(key < before)
        with self.engine.connect() as conn:
            return [json.loads(r) for r in reversed(list(conn.execute(query).scalars()))]

    # --- retention: each rule deletes in statements of at most DELETE_CHUNK rows --------

    def expire_plans(self, job: str, *, before_ms: int, through_batch: int) -> int:
        """Committed and abandoned plans that ended before `before_ms`, up to `through_batch` (what data quality
        validated: its next window reads the plans after it). Never a pending plan, nor the latest one, whose id
        the next plan's is counted from."""
        with self.engine.connect() as conn:
            latest = conn.execute(select(func.max(batches.c.batch_id)).where(batches.c.job_name == job)).scalar() or 0
        return self._delete_chunks(
            batches,
            batches.c.batch_id,
            job,
            batches.c.status.in_(("committed", "abandoned")),
            batches.c.batch_id <= through_batch,
            batches.c.batch_id < latest,
            func.coalesce(batches.c.committed_ms, batches.c.planned_ms) < before_ms,
        )

    def expire_metrics(self, job: str, *, before_ms: int) -> int:
        """Batch and rescale metrics recorded before `before_ms`, but the latest of each (the page's last batch)."""
        removed = 0
        for table, key in ((batch_metrics, batch_metrics.c.batch_id), (rescale_metrics, rescale_metrics.c.generation)):
            with self.engine.connect() as conn:
                latest = conn.execute(select(func.max(key)).where(table.c.job_name == job)).scalar() or 0
            removed += self._delete_chunks(table, key, job, table.c.created_ms < before_ms, key < latest)
        return removed

    def expire_transactional_ids(self, job: str, *, before_ms: int) -> int:
        """Closed transactional ids recorded before `before_ms`: no run reads them again (open ones are fenced first)."""
        return self._delete_chunks(
            transactions,
            transactions.c.transactional_id,
            job,
            transactions.c.state == "closed",
            transactions.c.created_ms < before_ms,
        )

    def expire_checkpoints(self, job: str) -> int:
        """Checkpoints of the generations before the previous one: a batch reads the current generation's, a
        rescale reads the current one's to write the next, and the previous stays for the operator."""
        current = self._current_generation(job)
        if current < 3:
            return 0
        return self._delete_chunks(checkpoints, checkpoints.c.id, job, checkpoints.c.generation < current - 1)

    def expire_generations(self, job: str, *, before_ms: int) -> int:
        """Generations written before `before_ms`, with their checkpoints, never the first (the job's identity in
        its sinks), the current or the previous one."""
        current = self._current_generation(job)
        if current < 3:
            return 0
        old = (generations.c.generation > 1, generations.c.generation < current - 1, generations.c.created_ms < before_ms)
        with self.engine.connect() as conn:
            numbers = list(conn.execute(select(generations.c.generation).where(generations.c.job_name == job, *old)).scalars())
        for n in numbers:  # at most one per rescale since the last maintenance
            self._delete_chunks(checkpoints, checkpoints.c.id, job, checkpoints.c.generation == n)
        return self._delete_chunks(generations, generations.c.generation, job, *old)

    def _current_generation(self, job: str) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(jobs.c.generation).where(jobs.c.job_name == job)).scalar() or 0

    def _delete_chunks(self, table: Table, key: Column, job: str, *where: Any) -> int:
        """Delete the job's rows matching `where`, oldest key first, DELETE_CHUNK at a time, each chunk its own
        short transaction (a batch's commit waits for one chunk at most); returns how many."""
        removed = 0
        while True:
            chunk = select(key).where(table.c.job_name == job, *where).order_by(key).limit(DELETE_CHUNK)
            with self.engine.begin() as conn:
                count = conn.execute(delete(table).where(table.c.job_name == job, key.in_(chunk))).rowcount
            removed += count
            if count < DELETE_CHUNK:
                return removed

    # --- lease ---------------------------------------------------------------

    def acquire_lease(self, job: str, owner: str, ttl_ms: int) -> Lease:
        """Take (or renew) the job's lease; fails while another owner holds an unexpired one."""
        for attempt in range(2):
            now = self.clock()
            try:
                with self.engine.begin() as conn:
                    res = conn.execute(
                        update(jobs)
                        .where(
                            jobs.c.job_name == job,
                            or_(jobs.c.lease_owner.is_(None), jobs.c.lease_owner == owner, jobs.c.lease_expires_ms < now),
                        )
                        .values(lease_owner=owner, lease_expires_ms=now + ttl_ms, updated_ms=now)
                    )
                    if res.rowcount == 1:
                        return Lease(job, owner, now + ttl_ms)
                    row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
                    if row is None:
                        conn.execute(
                            insert(jobs).values(
                                job_name=job, generation=0, lease_owner=owner, lease_expires_ms=now + ttl_ms, updated_ms=now
                            )
                        )
                        return Lease(job, owner, now + ttl_ms)
            except IntegrityError:
                if attempt:
                    raise
                continue  # another process created the job row at the same time
            raise LeaseHeldError(
                f"job {job!r} is leased by {row.lease_owner!r} for another {(row.lease_expires_ms - now) / 1000:.1f}s; "
                "a batch or rescale is running (or crashed and its lease has yet to expire)"
            )
        raise AssertionError("unreachable")

    def release_lease(self, job: str, owner: str) -> bool:
        with self.engine.begin() as conn:
            res = conn.execute(
                update(jobs)
                .where(jobs.c.job_name == job, jobs.c.lease_owner == owner)
                .values(lease_owner=None, lease_expires_ms=None)
            )
        return res.rowcount == 1

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
        with self.engine.begin() as conn:
            self._fence(conn, job, generation, owner)
            latest = self._pending(conn, job, last=True)
            if latest is not None and (after is None or latest.batch_id != after):
                return self._pending(conn, job) or latest
            last = conn.execute(select(func.max(batches.c.batch_id)).where(batches.c.job_name == job)).scalar() or 0
            plan = BatchPlan(job_name=job, batch_id=last + 1, generation=generation, ranges=ranges, side_inputs=side_inputs)
            conn.execute(
                insert(batches).values(
                    job_name=job,
                    batch_id=plan.batch_id,
                    generation=generation,
                    ranges=_ranges_to_json(ranges),
                    side_inputs=json.dumps([[ssp_to_key(s), o] for s, o in side_inputs]) if side_inputs else None,
                    status="planned",
                    planned_ms=self.clock(),
                )
            )
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
        rows = self._checkpoint_rows(
            plan.job_name, plan.generation, task_checkpoints, write_versions=write_versions, batch_id=plan.batch_id
        )
        with self.engine.begin() as conn:
            self._fence(conn, plan.job_name, plan.generation, owner)
            faults.point("commit.fenced")
            earlier = (
                conn.execute(
                    select(batches.c.batch_id).where(
                        batches.c.job_name == plan.job_name,
                        batches.c.batch_id < plan.batch_id,
                        batches.c.batch_id.not_in(ids),
                        batches.c.status == "planned",
                    )
                )
                .scalars()
                .first()
            )
            if earlier is not None:  # its replay would start from these checkpoints, past its ranges: its outputs lost
                raise BatchStateError(
                    f"job {plan.job_name!r}: batch {plan.batch_id} cannot commit before batch {earlier}, still pending; "
                    "batches commit in order (the earlier one replays first); nothing was written"
                )
            res = conn.execute(
                update(batches)
                .where(
                    batches.c.job_name == plan.job_name,
                    batches.c.batch_id.in_(ids),
                    batches.c.generation == plan.generation,
                    batches.c.status == "planned",
                )
                .values(status="committed", committed_ms=self.clock())
            )
            if res.rowcount != len(ids):
                raise BatchStateError(
                    f"job {plan.job_name!r}: batch {', '.join(map(str, ids))} is not pending under generation {plan.generation} "
                    "(already committed, or abandoned by a rescale); nothing was written"
                )
            faults.point("commit.plan_marked")
            self._insert_rows(conn, rows)
            faults.point("commit.checkpoints_written")
            if plan.batch_id % self.history_size == 0:  # amortized: a window over the generation's rows every N commits
                self._prune(conn, plan.job_name, plan.generation)
            faults.point("commit.before_commit")
        faults.point("commit.after_commit")

    # --- Kafka transactional ids (exactly-once outputs) -------------------------

    def open_transactional_ids(self, job: str) -> list[tuple[str, str]]:
        """(transactional.id, system) of the runs that may have left a transaction open, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(transactions.c.transactional_id, transactions.c.system)
                .where(transactions.c.job_name == job, transactions.c.state == "open")
                .order_by(transactions.c.created_ms, transactions.c.transactional_id)
            ).all()
        return [(r.transactional_id, r.system) for r in rows]

    def open_transactional_id(self, job: str, tid: str, system: str) -> None:
        """Record a run's transactional.id before it is used, so that the next run fences it whatever happens."""
        with self.engine.begin() as conn:
            conn.execute(
                insert(transactions).values(
                    job_name=job, transactional_id=tid, system=system, state="open", created_ms=self.clock()
                )
            )

    def close_transactional_ids(self, job: str, tids: Iterable[str]) -> None:
        """Those ids hold no transaction any more (fenced, or their run ended cleanly)."""
        if tids := list(tids):
            with self.engine.begin() as conn:
                conn.execute(
                    update(transactions)
                    .where(transactions.c.job_name == job, transactions.c.transactional_id.in_(tids))
                    .values(state="closed")
                )

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
    ) -> Generation:
        """Atomically replace generation `expected` (0: none yet) by a new one.

        `compute` gets the old generation's checkpoints, read under the row lock,
        and returns the new generation's. The caller must hold the lease.
        """
        now = self.clock()
        new_number = expected + 1
        with self.engine.begin() as conn:
            res = conn.execute(
                update(jobs)
                .where(
                    jobs.c.job_name == job,
                    jobs.c.generation == expected,
                    jobs.c.lease_owner == owner,
                    jobs.c.lease_expires_ms >= now,
                )
                .values(generation=new_number, updated_ms=now)
            )
            if res.rowcount != 1:
                self._raise_fenced(conn, job, expected, owner=owner, now=now)
            faults.point("rescale.fenced")
            pending = self._pending(conn, job)
            if pending is not None:
                if not abandon_pending:
                    raise PendingBatchError(
                        f"job {job!r}: batch {pending.batch_id} was planned under generation {pending.generation} and has not "
                        "committed; run it to completion first (its plan replays the same ranges), or abandon it"
                    )
                conn.execute(  # every one: a plan chained behind an upload may wait behind the earliest
                    update(batches).where(batches.c.job_name == job, batches.c.status == "planned").values(status="abandoned")
                )
            old = (
                self._read_checkpoints(conn, job, expected, read_versions=read_versions, live_max_age_ms=live_max_age_ms)
                if expected
                else {}
            )
            new = dict(compute(old))
            missing = {t.task_name for t in model.tasks()} - set(new)
            if missing:
                raise StoreError(f"no checkpoint computed for tasks {sorted(t.name for t in missing)[:5]}")
            conn.execute(
                insert(generations).values(
                    job_name=job,
                    generation=new_number,
                    factor=factor,
                    job_model=job_model_to_json(model, indent=None),
                    reason=reason,
                    created_ms=now,
                    origin=origin,
                )
            )
            faults.point("rescale.generation_written")
            self._insert_checkpoints(
                conn, job, new_number, task_checkpoints=new.values(), write_versions=write_versions, batch_id=None
            )
            faults.point("rescale.checkpoints_written")
        faults.point("rescale.after_commit")
        return Generation(
            job_name=job, number=new_number, factor=factor, job_model=model, reason=reason, created_ms=now, origin=origin
        )

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
        with self.engine.begin() as conn:
            self._fence(conn, job, generation, owner)
            known = {
                r
                for r in conn.execute(
                    select(checkpoints.c.task_name)
                    .where(checkpoints.c.job_name == job, checkpoints.c.generation == generation)
                    .distinct()
                ).scalars()
            }
            task_checkpoints = list(task_checkpoints)
            unknown = sorted(cp.task_name.name for cp in task_checkpoints if cp.task_name.name not in known)
            if unknown:
                raise StoreError(f"job {job!r} generation {generation} has no tasks {unknown[:5]}; nothing was written")
            self._insert_checkpoints(
                conn, job, generation, task_checkpoints=task_checkpoints, write_versions=write_versions, batch_id=None
            )
            self._prune(conn, job, generation)

    # --- internals -------------------------------------------------------------

    def _fence(self, conn: Connection, job: str, generation: int, owner: str | None) -> None:
        now = self.clock()
        res = conn.execute(update(jobs).where(jobs.c.job_name == job, jobs.c.generation == generation).values(updated_ms=now))
        if res.rowcount != 1:
            self._raise_fenced(conn, job, generation, owner=owner, now=now)
        row = conn.execute(select(jobs).where(jobs.c.job_name == job)).one()
        if row.lease_owner is not None and row.lease_owner != owner and row.lease_expires_ms >= now:
            raise LeaseHeldError(f"job {job!r} is leased by {row.lease_owner!r}; this writer ({owner!r}) is fenced")

    def _raise_fenced(self, conn: Connection, job: str, generation: int, *, owner: str | None, now: int) -> None:
        row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
        current = row.generation if row else None
        if current != generation:
            raise StaleGenerationError(
                f"job {job!r}: this writer works on generation {generation}, but the current generation is {current}; "
                "it is fenced and nothing was written"
            )
        assert row is not None  # its generation is this writer's
        raise LeaseHeldError(
            f"job {job!r}: the lease is held by {row.lease_owner!r}, not by {owner!r} (or it expired); nothing was written"
        )

    def _pending(self, conn: Connection, job: str, *, last: bool = False) -> BatchPlan | None:
        """The earliest plan not yet committed (the one to replay), or with `last` the latest."""
        order = batches.c.batch_id.desc() if last else batches.c.batch_id.asc()
        row = conn.execute(
            select(batches).where(batches.c.job_name == job, batches.c.status == "planned").order_by(order)
        ).first()
        return self._plan(row) if row else None

    @staticmethod
    def _plan(row) -> BatchPlan:
        return BatchPlan(
            job_name=row.job_name,
            batch_id=row.batch_id,
            generation=row.generation,
            ranges=_ranges_from_json(row.ranges),
            side_inputs=_side_inputs_from_json(row.side_inputs),
        )

    def _checkpoint_rows(
        self,
        job: str,
        generation: int,
        task_checkpoints: Iterable[TaskCheckpoint],
        *,
        write_versions: tuple[int, ...],
        batch_id: int | None,
    ) -> list[tuple[Any, ...]]:
        """The rows of the checkpoints (CHECKPOINT_COLUMNS), each version's payload in Samza's JSON (from a template
        per task's SSPs): tuples, built before the commit's transaction and its write lock."""
        now = self.clock()
        rows = []
        v1, v2 = 1 in write_versions, 2 in write_versions
        for cp in task_checkpoints:
            marks = watermarks_to_json(cp.watermarks) if cp.watermarks else None
            name = cp.task_name.name
            if v1:
                rows.append((job, generation, name, 1, offsets_json(cp.offsets, 1), marks, batch_id, now))
            if v2:
                payload = v2_json(cp.checkpoint_id or CheckpointId.create(), cp.offsets, cp.state_markers)
                rows.append((job, generation, name, 2, payload, marks, batch_id, now))
        return rows

    @staticmethod
    def _insert_rows(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        """One executemany of the driver's own statement: SQLAlchemy's per-row parameter processing took longer
        than SQLite's inserts at thousands of virtual tasks."""
        if not rows:
            return
        statement = insert(checkpoints).compile(dialect=conn.dialect, column_keys=list(CHECKPOINT_COLUMNS))
        if not statement.positional:
            conn.exec_driver_sql(str(statement), [dict(zip(CHECKPOINT_COLUMNS, r, strict=True)) for r in rows])
        elif tuple(statement.positiontup or ()) == CHECKPOINT_COLUMNS:
            conn.exec_driver_sql(str(statement), rows)
        else:
            order = operator.itemgetter(*(CHECKPOINT_COLUMNS.index(c) for c in statement.positiontup or ()))
            conn.exec_driver_sql(str(statement), [order(r) for r in rows])

    def _insert_checkpoints(
        self,
        conn: Connection,
        job: str,
        generation: int,
        *,
        task_checkpoints: Iterable[TaskCheckpoint],
        write_versions: tuple[int, ...],
        batch_id: int | None,
    ) -> None:
        self._insert_rows(
            conn, self._checkpoint_rows(job, generation, task_checkpoints, write_versions=write_versions, batch_id=batch_id)
        )

    def _prune(self, conn: Connection, job: str, generation: int) -> None:
        ranked = (
            select(
                checkpoints.c.id,
                func.row_number()
                .over(partition_by=(checkpoints.c.task_name, checkpoints.c.version), order_by=checkpoints.c.id.desc())
                .label("rn"),
            )
            .where(checkpoints.c.job_name == job, checkpoints.c.generation == generation)
            .subquery()
        )
        conn.execute(delete(checkpoints).where(checkpoints.c.id.in_(select(ranked.c.id).where(ranked.c.rn > self.history_size))))

    def _read_checkpoints(
        self, conn: Connection, job: str, generation: int, *, read_versions: tuple[int, ...], live_max_age_ms: int
    ) -> dict[TaskName, TaskCheckpoint]:
        latest = (
            select(func.max(checkpoints.c.id).label("id"))
            .where(
                checkpoints.c.job_name == job, checkpoints.c.generation == generation, checkpoints.c.version.in_(read_versions)
            )
            .group_by(checkpoints.c.task_name, checkpoints.c.version)
            .subquery()
        )
        rows = conn.execute(select(checkpoints).join(latest, and_(checkpoints.c.id == latest.c.id))).all()
        candidates: dict[str, dict[int, Candidate]] = {}
        for r in rows:
            candidates.setdefault(r.task_name, {})[r.version] = Candidate(r.created_ms, r)
        out = {}
        for task, by_version in candidates.items():
            chosen = choose(by_version, read_versions, live_max_age_ms)
            if chosen is not None:
                out[TaskName(task)] = self._decode(chosen.payload)
        return out

    @staticmethod
    def _decode(row) -> TaskCheckpoint:
        v2 = v2_from_json(row.payload) if row.version == 2 else None
        offsets = v2.input_offsets if v2 else v1_from_json(row.payload).offsets
        parsed: dict[SystemStreamPartition, int] = {s: int(o) for s, o in offsets.items() if o is not None}
        return TaskCheckpoint(
            task_name=TaskName(row.task_name),
            offsets=parsed,
            watermarks=watermarks_from_json(row.watermarks),
            checkpoint_id=v2.checkpoint_id if v2 else None,
            state_markers=v2.state_checkpoint_markers if v2 else {},
        )
