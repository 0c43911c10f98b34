"""The retention rules (run by `elasticity.maintenance`): each deletes in statements of at most `chunk` rows,
each statement its own short transaction, so a batch's commit waits for one chunk at most."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Table, delete, func, select
from sqlalchemy.engine import Engine

from elasticity.checkpoint.batch_plan import BatchStatus
from elasticity.checkpoint.store import batch_rows, generation_rows
from elasticity.checkpoint.store.store_schema import (
    attempt_failures,
    batch_metrics,
    batches,
    checkpoints,
    generations,
    rescale_metrics,
    transactions,
)
from elasticity.checkpoint.store.transactional_ids import TransactionalIdState


def expire_plans(engine: Engine, job: str, *, before_ms: int, through_batch: int, chunk: int) -> int:
    with engine.connect() as conn:
        latest = batch_rows.latest_id(conn, job)
    return delete_chunks(
        engine,
        batches,
        batches.c.batch_id,
        job,
        batches.c.status.in_((BatchStatus.COMMITTED, BatchStatus.ABANDONED)),
        batches.c.batch_id <= through_batch,
        batches.c.batch_id < latest,
        func.coalesce(batches.c.committed_ms, batches.c.planned_ms) < before_ms,
        chunk=chunk,
    )


def expire_metrics(engine: Engine, job: str, *, before_ms: int, chunk: int) -> int:
    removed = 0
    for table, key in ((batch_metrics, batch_metrics.c.batch_id), (rescale_metrics, rescale_metrics.c.generation)):
        with engine.connect() as conn:
            latest = conn.execute(select(func.max(key)).where(table.c.job_name == job)).scalar() or 0
        removed += delete_chunks(engine, table, key, job, table.c.created_ms < before_ms, key < latest, chunk=chunk)
    return removed


def expire_transactional_ids(engine: Engine, job: str, *, before_ms: int, chunk: int) -> int:
    return delete_chunks(
        engine,
        transactions,
        transactions.c.transactional_id,
        job,
        transactions.c.state == TransactionalIdState.CLOSED,
        transactions.c.created_ms < before_ms,
        chunk=chunk,
    )


def expire_failures(engine: Engine, job: str, *, before_ms: int, chunk: int) -> int:
    c = attempt_failures.c
    return delete_chunks(engine, attempt_failures, c.created_ms, job, c.created_ms < before_ms, chunk=chunk)


def expire_checkpoints(engine: Engine, job: str, *, chunk: int) -> int:
    with engine.connect() as conn:
        current = generation_rows.current(conn, job)
    if current < 3:
        return 0
    return delete_chunks(engine, checkpoints, checkpoints.c.id, job, checkpoints.c.generation < current - 1, chunk=chunk)


def expire_generations(engine: Engine, job: str, *, before_ms: int, chunk: int) -> int:
    with engine.connect() as conn:
        current = generation_rows.current(conn, job)
    if current < 3:
        return 0
    old = (generations.c.generation > 1, generations.c.generation < current - 1, generations.c.created_ms < before_ms)
    with engine.connect() as conn:
        numbers = list(conn.execute(select(generations.c.generation).where(generations.c.job_name == job, *old)).scalars())
    for n in numbers:  # at most one per rescale since the last maintenance
        delete_chunks(engine, checkpoints, checkpoints.c.id, job, checkpoints.c.generation == n, chunk=chunk)
    return delete_chunks(engine, generations, generations.c.generation, job, *old, chunk=chunk)


def delete_chunks(engine: Engine, table: Table, key: Column, job: str, *where: Any, chunk: int) -> int:
    """Delete the job's rows matching `where`, oldest key first, `chunk` at a time, each chunk its own
    transaction; returns how many."""
    removed = 0
    while True:
        keys = select(key).where(table.c.job_name == job, *where).order_by(key).limit(chunk)
        with engine.begin() as conn:
            count = conn.execute(delete(table).where(table.c.job_name == job, key.in_(keys))).rowcount
        removed += count
        if count < chunk:
            return removed
