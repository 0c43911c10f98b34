"""What each batch and each rescale measured, as JSON (the batch summary with SEP-32's metrics; the
rescale's job-model-generation-ns and checkpoint-compute-ns), one row per batch or generation; a batch's
freshness also as two columns, which the job page's percentiles over an hour read without any JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping

from sqlalchemy import Column, Connection, Table, delete, insert, select

from elasticity.checkpoint.store.store_schema import batch_metrics


def freshness_columns(freshness: Mapping[str, int] | None) -> dict[str, int]:
    """A batch's {"oldest", "newest"} freshness_ms as its row's columns (none without)."""
    return {"freshness_oldest_ms": freshness["oldest"], "freshness_newest_ms": freshness["newest"]} if freshness else {}


def put(conn: Connection, table: Table, key: Column, job: str, *, number: int, metrics_json: str, now: int, **extra: int) -> None:
    """One row per job and batch (or generation), replaced when recorded again."""
    conn.execute(delete(table).where(table.c.job_name == job, key == number))
    conn.execute(insert(table).values(job_name=job, **{key.name: number}, **extra, created_ms=now, metrics=metrics_json))


def latest(conn: Connection, table: Table, key: Column, job: str, *, limit: int, before: int | None) -> list[dict]:
    """The latest rows' metrics (with `before`, of the keys below it), oldest first."""
    query = select(table.c.metrics).where(table.c.job_name == job).order_by(key.desc()).limit(limit)
    if before is not None:
        query = query.where(key < before)
    return [json.loads(r) for r in reversed(list(conn.execute(query).scalars()))]


def freshness(conn: Connection, job: str, *, since_ms: int) -> list[tuple[int, int]]:
    t = batch_metrics.c
    query = (
        select(t.freshness_oldest_ms, t.freshness_newest_ms)
        .where(t.job_name == job, t.created_ms >= since_ms, t.freshness_oldest_ms.is_not(None))
        .order_by(t.batch_id)
    )
    return [(int(o), int(n)) for o, n in conn.execute(query)]
