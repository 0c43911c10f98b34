"""A job's lease and the fences of its writers, on its row of the jobs table.

Each fence is an UPDATE of the job row guarded by the generation the writer planned under: a stale writer
matches no row, fails, and changes nothing, and the statement takes the row lock, so everything the writer
reads after it in the same transaction is current. The store's facade opens that transaction
(`CheckpointStore._fenced`); these functions are its first statement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from sqlalchemy import Connection, insert, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from elasticity.checkpoint.store.store_errors import LeaseHeldError, StaleGenerationError
from elasticity.checkpoint.store.store_schema import jobs


@dataclass(frozen=True)
class Lease:
    job_name: str
    owner: str
    expires_ms: int


def lease(conn: Connection, job: str, clock: Callable[[], int]) -> Lease | None:
    row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
    if row is None or row.lease_owner is None or row.lease_expires_ms < clock():
        return None
    return Lease(job, row.lease_owner, row.lease_expires_ms)


def acquire(engine: Engine, job: str, owner: str, ttl_ms: int, *, clock: Callable[[], int]) -> Lease:
    """Take (or renew) the job's lease, each attempt its own transaction; fails while another owner holds an
    unexpired one."""
    for attempt in range(2):
        now = clock()
        try:
            with engine.begin() as conn:
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


def release(conn: Connection, job: str, owner: str) -> bool:
    res = conn.execute(
        update(jobs).where(jobs.c.job_name == job, jobs.c.lease_owner == owner).values(lease_owner=None, lease_expires_ms=None)
    )
    return res.rowcount == 1


def fence(conn: Connection, job: str, generation: int, owner: str | None, *, now: int) -> None:
    """A batch's or an operator's write: the job still at `generation`, and no other owner holding the lease
    (a writer without an owner passes while nobody holds it)."""
    res = conn.execute(update(jobs).where(jobs.c.job_name == job, jobs.c.generation == generation).values(updated_ms=now))
    if res.rowcount != 1:
        raise_fenced(conn, job, generation, owner=owner)
    row = conn.execute(select(jobs).where(jobs.c.job_name == job)).one()
    if row.lease_owner is not None and row.lease_owner != owner and row.lease_expires_ms >= now:
        raise LeaseHeldError(f"job {job!r} is leased by {row.lease_owner!r}; this writer ({owner!r}) is fenced")


def take_generation(conn: Connection, job: str, expected: int, owner: str | None, *, now: int) -> None:
    """A rescale's write: the job moves from generation `expected` to the next, which requires holding the lease."""
    res = conn.execute(
        update(jobs)
        .where(
            jobs.c.job_name == job,
            jobs.c.generation == expected,
            jobs.c.lease_owner == owner,
            jobs.c.lease_expires_ms >= now,
        )
        .values(generation=expected + 1, updated_ms=now)
    )
    if res.rowcount != 1:
        raise_fenced(conn, job, expected, owner=owner)


def raise_fenced(conn: Connection, job: str, generation: int, *, owner: str | None) -> NoReturn:
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
