"""What the job page says is wrong, kept in the store so that whichever process wrote it (a worker running a
task attempt, the API server probing an engine) the API server reads it back: each task attempt's failure in
one line, and whether each Spark Connect server answered its last probe, and since when."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select, update

from elasticity.checkpoint.store.store_schema import attempt_failures, engine_health


@dataclass(frozen=True, kw_only=True)
class AttemptFailure:
    run_id: str
    attempt: int
    task: str  # run_batches | rescale | quality | maintenance
    error: str
    created_ms: int


@dataclass(frozen=True, kw_only=True)
class EngineState:
    address: str
    reachable: bool
    since_ms: int  # reachable (or not) since then
    checked_ms: int  # the last probe


def put_failure(conn: Connection, job: str, failure: AttemptFailure) -> None:
    """One row per attempt, replaced if the same attempt fails again."""
    c = attempt_failures.c
    conn.execute(delete(attempt_failures).where(c.job_name == job, c.run_id == failure.run_id, c.attempt == failure.attempt))
    conn.execute(
        insert(attempt_failures).values(
            job_name=job,
            run_id=failure.run_id,
            attempt=failure.attempt,
            task=failure.task,
            error=failure.error,
            created_ms=failure.created_ms,
        )
    )


def last_failure(conn: Connection, job: str, run_id: str, task: str | None = None) -> AttemptFailure | None:
    """The run's latest failed attempt (of `task`, if given)."""
    c = attempt_failures.c
    query = select(attempt_failures).where(c.job_name == job, c.run_id == run_id)
    if task is not None:
        query = query.where(c.task == task)
    r = conn.execute(query.order_by(c.attempt.desc(), c.created_ms.desc()).limit(1)).first()
    if r is None:
        return None
    return AttemptFailure(run_id=r.run_id, attempt=r.attempt, task=r.task, error=r.error, created_ms=r.created_ms)


def recent_failures(conn: Connection, job: str, limit: int) -> list[AttemptFailure]:
    """The job's latest failed attempts, of any run and task, newest first."""
    c = attempt_failures.c
    rows = conn.execute(
        select(attempt_failures).where(c.job_name == job).order_by(c.created_ms.desc(), c.attempt.desc()).limit(limit)
    )
    return [AttemptFailure(run_id=r.run_id, attempt=r.attempt, task=r.task, error=r.error, created_ms=r.created_ms) for r in rows]


def probed(conn: Connection, address: str, *, reachable: bool, now: int) -> EngineState:
    """Record a probe's answer: `since_ms` moves only when the answer changes."""
    c = engine_health.c
    r = conn.execute(select(engine_health).where(c.address == address)).first()
    if r is None:
        conn.execute(insert(engine_health).values(address=address, reachable=reachable, since_ms=now, checked_ms=now))
        return EngineState(address=address, reachable=reachable, since_ms=now, checked_ms=now)
    since = r.since_ms if bool(r.reachable) == reachable else now
    conn.execute(update(engine_health).where(c.address == address).values(reachable=reachable, since_ms=since, checked_ms=now))
    return EngineState(address=address, reachable=reachable, since_ms=since, checked_ms=now)


def expire_engines(conn: Connection, *, before_ms: int) -> int:
    """Engines no probe has reached since `before_ms` (a server moved or gone); a few rows, one statement."""
    return conn.execute(delete(engine_health).where(engine_health.c.checked_ms < before_ms)).rowcount
