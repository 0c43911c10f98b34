"""A job's lease and the fences of its writers, on its row of the jobs table.

Each fence is an UPDATE of the job row guarded by the generation the writer planned under: a stale writer
matches no row, fails, and changes nothing, and the statement takes the row lock, so everything the writer
reads after it in the same transaction is current. The store's facade opens that transaction
(`CheckpointStore._fenced`); these functions are its first statement.

The lease's epoch is its fencing token: every take by an attempt (each has an owner of its own,
`attempt_token`) moves it on, a renewal keeps it. A writer that took the lease at epoch E writes only while
the row still says E and names it: once another attempt took the lease it is refused for good, also after
that attempt's lease expired or was released (an expiry lets the next attempt take the lease, never the
superseded one write again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from sqlalchemy import Connection, insert, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from tenacity import retry, retry_if_exception_type, stop_after_attempt

from elasticity.checkpoint.store.attempt_token import supersedes
from elasticity.checkpoint.store.store_errors import LeaseHeldError, StaleGenerationError, SupersededError
from elasticity.checkpoint.store.store_schema import jobs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    job_name: str
    owner: str
    expires_ms: int
    epoch: int = 0  # the row's lease_epoch as this owner took it: what its writes are fenced by


def lease(conn: Connection, job: str, clock: Callable[[], int]) -> Lease | None:
    row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
    if row is None or row.lease_owner is None or row.lease_expires_ms < clock():
        return None
    return Lease(job, row.lease_owner, row.lease_expires_ms, row.lease_epoch)


def acquire(engine: Engine, job: str, owner: str, ttl_ms: int, *, clock: Callable[[], int], epoch: int | None = None) -> Lease:
    """Take the job's lease, each call its own transaction: a new epoch, while nobody else holds an unexpired
    lease (LeaseHeldError). With `epoch` (the epoch this owner took it at), renew it instead, expired or not, as
    long as nobody took it since (SupersededError)."""
    if epoch is not None:
        return _renew(engine, job, owner, ttl_ms, clock=clock, epoch=epoch)
    return _take(engine, job, owner, ttl_ms, clock=clock)


@retry(retry=retry_if_exception_type(IntegrityError), stop=stop_after_attempt(2), reraise=True)
def _take(engine: Engine, job: str, owner: str, ttl_ms: int, *, clock: Callable[[], int]) -> Lease:
    """One try at a new epoch; an IntegrityError means another process created the job row at the same time,
    and the second try finds it."""
    now = clock()
    with engine.begin() as conn:
        res = conn.execute(
            update(jobs)
            .where(
                jobs.c.job_name == job,
                or_(jobs.c.lease_owner.is_(None), jobs.c.lease_owner == owner, jobs.c.lease_expires_ms < now),
            )
            .values(lease_owner=owner, lease_expires_ms=now + ttl_ms, lease_epoch=jobs.c.lease_epoch + 1, updated_ms=now)
        )
        if res.rowcount == 1:
            taken = conn.execute(select(jobs.c.lease_epoch).where(jobs.c.job_name == job)).scalar_one()
            return Lease(job, owner, now + ttl_ms, taken)
        row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
        if row is None:
            conn.execute(
                insert(jobs).values(
                    job_name=job,
                    generation=0,
                    lease_owner=owner,
                    lease_expires_ms=now + ttl_ms,
                    lease_epoch=1,
                    updated_ms=now,
                )
            )
            return Lease(job, owner, now + ttl_ms, 1)
    if supersedes(owner, row.lease_owner):
        return _take_over(engine, job, owner, ttl_ms, clock=clock, holder=row.lease_owner, epoch=row.lease_epoch)
    raise LeaseHeldError(
        f"job {job!r} is leased by {row.lease_owner!r} for another {(row.lease_expires_ms - now) / 1000:.1f}s; "
        "a batch or rescale is running (or crashed and its lease has yet to expire)"
    )


def _take_over(engine: Engine, job: str, owner: str, ttl_ms: int, *, clock: Callable[[], int], holder: str, epoch: int) -> Lease:
    """The lease taken from an earlier try of the same run (`supersedes`), at a new epoch, only if that try still
    holds it at the epoch read (else whoever took it meanwhile holds it: LeaseHeldError)."""
    now = clock()
    with engine.begin() as conn:
        res = conn.execute(
            update(jobs)
            .where(jobs.c.job_name == job, jobs.c.lease_owner == holder, jobs.c.lease_epoch == epoch)
            .values(lease_owner=owner, lease_expires_ms=now + ttl_ms, lease_epoch=epoch + 1, updated_ms=now)
        )
    if res.rowcount != 1:
        raise LeaseHeldError(f"job {job!r}: the lease moved on while {owner!r} took it over from {holder!r}")
    log.info("job %r: %s took the lease over from the earlier try %s (epoch %d)", job, owner, holder, epoch + 1)
    return Lease(job, owner, now + ttl_ms, epoch + 1)


def _renew(engine: Engine, job: str, owner: str, ttl_ms: int, *, clock: Callable[[], int], epoch: int) -> Lease:
    now = clock()
    with engine.begin() as conn:
        res = conn.execute(
            update(jobs)
            .where(jobs.c.job_name == job, jobs.c.lease_owner == owner, jobs.c.lease_epoch == epoch)
            .values(lease_expires_ms=now + ttl_ms, updated_ms=now)
        )
        if res.rowcount != 1:
            raise_superseded(conn, job, owner, epoch)
    return Lease(job, owner, now + ttl_ms, epoch)


def want(conn: Connection, job: str, *, now: int) -> None:
    """A rescale waits for the lease: noted on the job's row (no row yet: nothing runs to ask)."""
    conn.execute(update(jobs).where(jobs.c.job_name == job).values(lease_wanted_ms=now))


def wanted_since(conn: Connection, job: str) -> int | None:
    return conn.execute(select(jobs.c.lease_wanted_ms).where(jobs.c.job_name == job)).scalar()


def release(conn: Connection, job: str, owner: str, epoch: int | None) -> bool:
    """Give the lease up: only the owner holding it (at `epoch`, when known) can; a superseded attempt's exit
    leaves its successor's lease alone."""
    where = [jobs.c.job_name == job, jobs.c.lease_owner == owner]
    if epoch is not None:
        where.append(jobs.c.lease_epoch == epoch)
    res = conn.execute(update(jobs).where(*where).values(lease_owner=None, lease_expires_ms=None))
    return res.rowcount == 1


def check(conn: Connection, job: str, owner: str | None, epoch: int | None, *, now: int) -> None:
    """The lease is still this writer's (no write): what a writer checks before it deletes or moves files."""
    row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
    if row is not None:
        _check_row(conn, row, job, owner=owner, epoch=epoch, now=now)


def _check_row(conn: Connection, row: Any, job: str, *, owner: str | None, epoch: int | None, now: int) -> None:
    if epoch is not None and owner is not None:
        if row.lease_owner != owner or row.lease_epoch != epoch:
            raise_superseded(conn, job, owner, epoch)
        return
    if owner is None:  # a writer without a lease (the checkpoint tool): while nobody holds an unexpired one
        if row.lease_owner is not None and row.lease_expires_ms >= now:
            raise LeaseHeldError(f"job {job!r} is leased by {row.lease_owner!r}; this writer (no owner) is fenced")
        return
    # an owner that took no lease through this store: by its name alone, and never past another owner's lease
    if row.lease_owner is not None and row.lease_owner != owner:
        raise LeaseHeldError(f"job {job!r} is leased by {row.lease_owner!r}; this writer ({owner!r}) is fenced")


def fence(conn: Connection, job: str, generation: int, owner: str | None, *, now: int, epoch: int | None = None) -> None:
    """A batch's or an operator's write: the job still at `generation`, and the lease still the writer's (with
    `epoch`: the owner and the epoch it took the lease at; see `_check_row` for writers without)."""
    res = conn.execute(update(jobs).where(jobs.c.job_name == job, jobs.c.generation == generation).values(updated_ms=now))
    if res.rowcount != 1:
        raise_fenced(conn, job, generation, owner=owner)
    row = conn.execute(select(jobs).where(jobs.c.job_name == job)).one()
    _check_row(conn, row, job, owner=owner, epoch=epoch, now=now)


def take_generation(conn: Connection, job: str, expected: int, owner: str | None, *, now: int, epoch: int | None = None) -> None:
    """A rescale's write: the job moves from generation `expected` to the next, which requires holding the lease
    (at `epoch`, when known)."""
    where = [jobs.c.job_name == job, jobs.c.generation == expected, jobs.c.lease_owner == owner, jobs.c.lease_expires_ms >= now]
    if epoch is not None:
        where.append(jobs.c.lease_epoch == epoch)
    res = conn.execute(update(jobs).where(*where).values(generation=expected + 1, updated_ms=now))
    if res.rowcount != 1:
        row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
        if row is not None and row.generation == expected and owner is not None and epoch is not None:
            _check_row(conn, row, job, owner=owner, epoch=epoch, now=now)  # superseded: says by whom
        raise_fenced(conn, job, expected, owner=owner)


def raise_superseded(conn: Connection, job: str, owner: str, epoch: int) -> NoReturn:
    row = conn.execute(select(jobs).where(jobs.c.job_name == job)).first()
    now_epoch = row.lease_epoch if row is not None else None
    holder = row.lease_owner if row is not None else None
    by = f"held by attempt {holder!r}" if holder else "taken by a later attempt and released since"
    raise SupersededError(
        f"job {job!r}: attempt {owner!r} took the lease at epoch {epoch}, but the lease is at epoch {now_epoch} "
        f"({by}); this attempt is superseded and nothing was written",
        owner=owner,
        epoch=epoch,
        superseded_by=holder,
        current_epoch=now_epoch,
    )


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
