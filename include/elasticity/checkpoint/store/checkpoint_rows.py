"""Each virtual task's checkpoints, per generation and version (Samza's CheckpointV1 / CheckpointV2 JSON):
written by a batch's commit, a rescale or the operator's overwrite, the last N kept per task and version
(a commit in N prunes what is older, so a task holds at most 2N - 1 rows)."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select

from elasticity.checkpoint.serde import (
    offsets_json,
    v1_from_json,
    v2_from_json,
    v2_json,
    watermarks_from_json,
    watermarks_to_json,
)
from elasticity.checkpoint.store.store_errors import decoding
from elasticity.checkpoint.store.store_schema import CHECKPOINT_COLUMNS, checkpoints
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint
from elasticity.checkpoint.versions import Candidate, choose
from elasticity.jobmodel.model import SystemStreamPartition, TaskName


def rows_of(
    job: str,
    generation: int,
    task_checkpoints: Iterable[TaskCheckpoint],
    *,
    write_versions: tuple[int, ...],
    batch_id: int | None,
    now: int,
) -> list[tuple[Any, ...]]:
    """The rows of the checkpoints (CHECKPOINT_COLUMNS), each version's payload in Samza's JSON (from a template
    per task's SSPs): tuples, built before a commit's transaction and its write lock."""
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


def insert_rows(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
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


def prune(conn: Connection, job: str, generation: int, *, keep: int) -> None:
    """The generation's checkpoints beyond the last `keep` of each task and version."""
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
    conn.execute(delete(checkpoints).where(checkpoints.c.id.in_(select(ranked.c.id).where(ranked.c.rn > keep))))


def latest(
    conn: Connection, job: str, generation: int, *, read_versions: tuple[int, ...], live_max_age_ms: int
) -> dict[TaskName, TaskCheckpoint]:
    """Each task's checkpoint: of its latest row per version read, the one Samza's rule chooses (`choose`)."""
    newest = (
        select(func.max(checkpoints.c.id).label("id"))
        .where(checkpoints.c.job_name == job, checkpoints.c.generation == generation, checkpoints.c.version.in_(read_versions))
        .group_by(checkpoints.c.task_name, checkpoints.c.version)
        .subquery()
    )
    rows = conn.execute(select(checkpoints).join(newest, and_(checkpoints.c.id == newest.c.id))).all()
    candidates: dict[str, dict[int, Candidate]] = {}
    for r in rows:
        candidates.setdefault(r.task_name, {})[r.version] = Candidate(r.created_ms, r)
    out = {}
    for task, by_version in candidates.items():
        chosen = choose(by_version, read_versions, live_max_age_ms)
        if chosen is not None:
            out[TaskName(task)] = decode(chosen.payload)
    return out


def history(conn: Connection, job: str, task_name: TaskName, version: int, *, limit: int) -> list[TaskCheckpoint]:
    rows = conn.execute(
        select(checkpoints)
        .where(checkpoints.c.job_name == job, checkpoints.c.task_name == task_name.name, checkpoints.c.version == version)
        .order_by(checkpoints.c.id.desc())
        .limit(limit)
    ).all()
    return [decode(r) for r in rows]


def task_names(conn: Connection, job: str, generation: int) -> set[str]:
    """The tasks that have checkpoints in the generation."""
    query = select(checkpoints.c.task_name).where(checkpoints.c.job_name == job, checkpoints.c.generation == generation)
    return set(conn.execute(query.distinct()).scalars())


def decode(row) -> TaskCheckpoint:
    with decoding(f"checkpoint row {row.id} (job {row.job_name!r}, task {row.task_name!r}, version {row.version})"):
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
