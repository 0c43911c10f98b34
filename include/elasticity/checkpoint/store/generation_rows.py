"""A job's generations: each JobModel, its factor and why it was made, numbered from 1; the job row says
which is current (0: none yet)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select

from elasticity.checkpoint.store.store_errors import decoding
from elasticity.checkpoint.store.store_schema import generations, jobs
from elasticity.jobmodel.model import JobModel
from elasticity.jobmodel.object_mapper import job_model_from_json, job_model_to_json


@dataclass(frozen=True, kw_only=True)
class Generation:
    job_name: str
    number: int
    factor: int
    job_model: JobModel
    reason: str
    created_ms: int
    origin: str = "manual"  # manual (a person: the rescale DAG or CLI), schedule, autosize, start, partitions, replay
    replay: str | None = None  # a replay's generation: its Replay as JSON (elasticity.checkpoint.replay)
    decision: str | None = None  # the autosizer's decision record as JSON (elasticity.scaling.decision.AutosizeRecord)


@functools.lru_cache(maxsize=16)
def _job_model(text: str) -> JobModel:
    """A generation's job model, decoded once per process: it never changes, and at thousands of virtual
    tasks decoding it took longer than planning the batch it is read for."""
    return job_model_from_json(text)


def _decoded_model(job: str, row) -> JobModel:
    with decoding(f"generation row {row.generation} of job {job!r} (its job model)"):
        return _job_model(row.job_model)


def current(conn: Connection, job: str) -> int:
    """The job's current generation (0: none yet, or no job row)."""
    return conn.execute(select(jobs.c.generation).where(jobs.c.job_name == job)).scalar() or 0


def read(conn: Connection, job: str, number: int | None) -> Generation | None:
    """Generation `number` of the job, or with None its current one."""
    if number is None:
        number = conn.execute(select(jobs.c.generation).where(jobs.c.job_name == job)).scalar()
        if not number:
            return None
    row = conn.execute(select(generations).where(generations.c.job_name == job, generations.c.generation == number)).first()
    if row is None:
        return None
    return Generation(
        job_name=job,
        number=row.generation,
        factor=row.factor,
        job_model=_decoded_model(job, row),
        reason=row.reason,
        created_ms=row.created_ms,
        origin=row.origin or "manual",
        replay=row.replay,
        decision=row.decision,
    )


def numbers(conn: Connection, job: str, limit: int | None) -> list[int]:
    """The job's generation numbers, newest first; with `limit`, only the latest that many."""
    query = select(generations.c.generation).where(generations.c.job_name == job).order_by(generations.c.generation.desc())
    return list(conn.execute(query if limit is None else query.limit(limit)).scalars())


def insert_generation(conn: Connection, generation: Generation) -> None:
    conn.execute(
        insert(generations).values(
            job_name=generation.job_name,
            generation=generation.number,
            factor=generation.factor,
            job_model=job_model_to_json(generation.job_model, indent=None),
            reason=generation.reason,
            created_ms=generation.created_ms,
            origin=generation.origin,
            replay=generation.replay,
            decision=generation.decision,
        )
    )
