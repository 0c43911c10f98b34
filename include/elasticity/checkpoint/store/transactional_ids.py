"""Each run's Kafka transactional.id (exactly-once outputs), recorded open before the run uses it, so that
the next run fences it whatever happens; closed once fenced, or when its run ended cleanly."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from sqlalchemy import Connection, insert, select, update

from elasticity.checkpoint.store.store_schema import transactions


class TransactionalIdState(StrEnum):
    """A transactional id's row: open (its run may have left a transaction open: fence it) or closed."""

    OPEN = "open"
    CLOSED = "closed"


def open_ids(conn: Connection, job: str) -> list[tuple[str, str]]:
    """(transactional.id, system) of the runs that may have left a transaction open, oldest first."""
    rows = conn.execute(
        select(transactions.c.transactional_id, transactions.c.system)
        .where(transactions.c.job_name == job, transactions.c.state == TransactionalIdState.OPEN)
        .order_by(transactions.c.created_ms, transactions.c.transactional_id)
    ).all()
    return [(r.transactional_id, r.system) for r in rows]


def record_open(conn: Connection, job: str, tid: str, system: str, *, now: int) -> None:
    conn.execute(
        insert(transactions).values(
            job_name=job, transactional_id=tid, system=system, state=TransactionalIdState.OPEN, created_ms=now
        )
    )


def close(conn: Connection, job: str, tids: Iterable[str]) -> None:
    conn.execute(
        update(transactions)
        .where(transactions.c.job_name == job, transactions.c.transactional_id.in_(list(tids)))
        .values(state=TransactionalIdState.CLOSED)
    )
