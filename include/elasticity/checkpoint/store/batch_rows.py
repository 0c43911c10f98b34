"""The write-ahead batch plans: planned, then committed, or abandoned by a rescale. Every function runs on
the caller's connection; those that write, inside the facade's fenced transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import Connection, func, insert, select, update

from elasticity.checkpoint.batch_plan import BatchPlan, BatchStatus, OffsetRange
from elasticity.checkpoint.store.store_errors import BatchStateError, PendingBatchError, decoding
from elasticity.checkpoint.store.store_schema import batches
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.jobmodel.object_mapper import ssp_from_key, ssp_to_key


def _ranges_to_json(ranges: Iterable[OffsetRange]) -> str:
    return json.dumps([[ssp_to_key(r.ssp), r.start, r.end] for r in ranges])


def _ranges_from_json(text_: str) -> tuple[OffsetRange, ...]:
    return tuple(OffsetRange(ssp_from_key(k), int(s), int(e)) for k, s, e in json.loads(text_))


def _side_inputs_from_json(text_: str | None) -> tuple[tuple[SystemStreamPartition, int], ...]:
    return tuple((ssp_from_key(k), int(o)) for k, o in json.loads(text_)) if text_ else ()


def plan_of(row) -> BatchPlan:
    with decoding(f"batch row {row.batch_id} of job {row.job_name!r}"):
        return BatchPlan(
            job_name=row.job_name,
            batch_id=row.batch_id,
            generation=row.generation,
            ranges=_ranges_from_json(row.ranges),
            side_inputs=_side_inputs_from_json(row.side_inputs),
        )


def pending(conn: Connection, job: str, *, last: bool = False) -> BatchPlan | None:
    """The earliest plan not yet committed (the one to replay), or with `last` the latest."""
    order = batches.c.batch_id.desc() if last else batches.c.batch_id.asc()
    row = conn.execute(
        select(batches).where(batches.c.job_name == job, batches.c.status == BatchStatus.PLANNED).order_by(order)
    ).first()
    return plan_of(row) if row else None


def plan(conn: Connection, job: str, batch_id: int) -> tuple[BatchPlan, BatchStatus] | None:
    row = conn.execute(select(batches).where(batches.c.job_name == job, batches.c.batch_id == batch_id)).first()
    return (plan_of(row), BatchStatus(row.status)) if row else None


def plans(conn: Connection, job: str, status: BatchStatus | None, after: int) -> list[BatchPlan]:
    query = select(batches).where(batches.c.job_name == job, batches.c.batch_id > after).order_by(batches.c.batch_id)
    if status:
        query = query.where(batches.c.status == status)
    return [plan_of(r) for r in conn.execute(query)]


def with_status(conn: Connection, job: str, status: BatchStatus) -> list[int]:
    return list(conn.execute(select(batches.c.batch_id).where(batches.c.job_name == job, batches.c.status == status)).scalars())


def latest_id(conn: Connection, job: str) -> int:
    """The job's highest batch id, whatever its status (0: none yet): the next plan's is counted from it."""
    return conn.execute(select(func.max(batches.c.batch_id)).where(batches.c.job_name == job)).scalar() or 0


def insert_plan(
    conn: Connection,
    job: str,
    generation: int,
    ranges: tuple[OffsetRange, ...],
    *,
    side_inputs: tuple[tuple[SystemStreamPartition, int], ...],
    now: int,
) -> BatchPlan:
    """The next batch's plan, its id one above the latest."""
    plan = BatchPlan(
        job_name=job, batch_id=latest_id(conn, job) + 1, generation=generation, ranges=ranges, side_inputs=side_inputs
    )
    conn.execute(
        insert(batches).values(
            job_name=job,
            batch_id=plan.batch_id,
            generation=generation,
            ranges=_ranges_to_json(ranges),
            side_inputs=json.dumps([[ssp_to_key(s), o] for s, o in side_inputs]) if side_inputs else None,
            status=BatchStatus.PLANNED,
            planned_ms=now,
        )
    )
    return plan


def mark_committed(conn: Connection, plan: BatchPlan, ids: tuple[int, ...], *, now: int) -> None:
    """The plan and those it covers, committed; refused while an earlier batch it does not cover is pending
    (batches commit in order), or when one of them is no longer pending under the plan's generation."""
    earlier = (
        conn.execute(
            select(batches.c.batch_id).where(
                batches.c.job_name == plan.job_name,
                batches.c.batch_id < plan.batch_id,
                batches.c.batch_id.not_in(ids),
                batches.c.status == BatchStatus.PLANNED,
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
            batches.c.status == BatchStatus.PLANNED,
        )
        .values(status=BatchStatus.COMMITTED, committed_ms=now)
    )
    if res.rowcount != len(ids):
        raise BatchStateError(
            f"job {plan.job_name!r}: batch {', '.join(map(str, ids))} is not pending under generation {plan.generation} "
            "(already committed, or abandoned by a rescale); nothing was written"
        )


def abandon_pending(conn: Connection, job: str, *, abandon: bool) -> None:
    """Before a rescale: every pending plan abandoned (a plan chained behind an upload may wait behind the
    earliest), or, without `abandon`, the rescale refused while one is pending."""
    first = pending(conn, job)
    if first is None:
        return
    if not abandon:
        raise PendingBatchError(
            f"job {job!r}: batch {first.batch_id} was planned under generation {first.generation} and has not "
            "committed; run it to completion first (its plan replays the same ranges), or abandon it"
        )
    conn.execute(
        update(batches)
        .where(batches.c.job_name == job, batches.c.status == BatchStatus.PLANNED)
        .values(status=BatchStatus.ABANDONED)
    )
