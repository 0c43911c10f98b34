"""What data quality reads back, kept in the store rather than on the disk of whichever worker ran it: the
validated edge (one row per job, replaced whole in one transaction, so an edge is whole or not there) and the
index of its runs (a row per kept run, which the job page and the rolling summary read a page of, newest
first, so what they read does not grow with the job's age)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, delete, func, insert, select

from elasticity.checkpoint.store.store_schema import quality_edges, quality_runs


@dataclass(frozen=True, kw_only=True)
class QualityEdge:
    """The edge as stored: its JSON document (factor, checkpoints, Kafka edges) and its Parquet tables."""

    last_batch: int
    edge: str
    positions: bytes
    state: bytes | None = None
    kafka_positions: bytes | None = None
    updated_ms: int = 0


@dataclass(frozen=True, kw_only=True)
class QualityRun:
    """A run's line in the index: `report` is where its report and Data Docs are (an object-store URI or a
    folder); `window` and `checks` are JSON (the checks without their examples)."""

    seq: int
    run: str
    report: str
    window: str
    success: bool
    checks: str
    finished_ms: int


def edge(conn: Connection, job: str) -> QualityEdge | None:
    row = conn.execute(select(quality_edges).where(quality_edges.c.job_name == job)).first()
    if row is None:
        return None
    return QualityEdge(
        last_batch=row.last_batch,
        edge=row.edge,
        positions=row.positions,
        state=row.state,
        kafka_positions=row.kafka_positions,
        updated_ms=row.updated_ms,
    )


def last_batch(conn: Connection, job: str) -> int:
    found = conn.execute(select(quality_edges.c.last_batch).where(quality_edges.c.job_name == job)).scalar()
    return int(found or 0)


def put_edge(conn: Connection, job: str, e: QualityEdge, *, now: int) -> None:
    """Replace the job's edge (the caller's transaction makes the switch atomic)."""
    conn.execute(delete(quality_edges).where(quality_edges.c.job_name == job))
    conn.execute(
        insert(quality_edges).values(
            job_name=job,
            last_batch=e.last_batch,
            edge=e.edge,
            positions=e.positions,
            state=e.state,
            kafka_positions=e.kafka_positions,
            updated_ms=now,
        )
    )


def add_run(conn: Connection, job: str, run: QualityRun) -> int:
    """Append a run (its `seq` ignored: the next one is given); an earlier line of the same report (a retried run
    writing its folder again) is replaced, so a run is listed once, at its latest attempt. Returns its seq."""
    c = quality_runs.c
    seq = int(conn.execute(select(func.max(c.seq)).where(c.job_name == job)).scalar() or 0) + 1  # never one given before
    conn.execute(delete(quality_runs).where(c.job_name == job, c.report == run.report))
    conn.execute(
        insert(quality_runs).values(
            job_name=job,
            seq=seq,
            run=run.run,
            report=run.report,
            window=run.window,
            success=run.success,
            checks=run.checks,
            finished_ms=run.finished_ms,
        )
    )
    return seq


def _row(r) -> QualityRun:
    return QualityRun(
        seq=r.seq,
        run=r.run,
        report=r.report,
        window=r.window,
        success=bool(r.success),
        checks=r.checks,
        finished_ms=r.finished_ms,
    )


def runs(conn: Connection, job: str, *, limit: int, before: int | None = None) -> list[QualityRun]:
    """Up to `limit` runs, newest first, of those with `seq` below `before` (None: the latest)."""
    query = select(quality_runs).where(quality_runs.c.job_name == job).order_by(quality_runs.c.seq.desc()).limit(limit)
    if before is not None:
        query = query.where(quality_runs.c.seq < before)
    return [_row(r) for r in conn.execute(query)]


def run_by_folder(conn: Connection, job: str, folder: str) -> QualityRun | None:
    """The kept run whose report is the folder (the last part of its path, before a URI's query) `folder`, the
    latest if several are."""
    name = "%/" + folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    c = quality_runs.c
    query = (
        select(quality_runs)
        .where(c.job_name == job, c.report.like(name, escape="\\") | c.report.like(name + "?%", escape="\\"))
        .order_by(c.seq.desc())
    )
    found = (_row(r) for r in conn.execute(query) if r.report.partition("?")[0].rstrip("/").rsplit("/", 1)[-1] == folder)
    return next(found, None)


def expired_runs(conn: Connection, job: str, *, keep: int, keep_failed: int) -> list[QualityRun]:
    """The runs retention removes: all but the latest `keep`, and the latest `keep_failed` failed ones besides."""
    c = quality_runs.c
    cutoff = conn.execute(select(c.seq).where(c.job_name == job).order_by(c.seq.desc()).offset(keep - 1).limit(1)).scalar()
    if cutoff is None:
        return []
    failed = select(c.seq).where(c.job_name == job, c.seq < cutoff, ~c.success).order_by(c.seq.desc()).limit(keep_failed)
    kept_failed = set(conn.execute(failed).scalars())
    older = conn.execute(select(quality_runs).where(c.job_name == job, c.seq < cutoff).order_by(c.seq))
    return [_row(r) for r in older if r.seq not in kept_failed]


def remove_runs(conn: Connection, job: str, seqs: list[int]) -> int:
    return conn.execute(delete(quality_runs).where(quality_runs.c.job_name == job, quality_runs.c.seq.in_(seqs))).rowcount
