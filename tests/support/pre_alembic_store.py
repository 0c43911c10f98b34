"""A checkpoint store as the code before schema versions wrote it (no `elasticity_alembic_version` table), with
real content: two jobs' generations, their checkpoints (V1 and V2, watermarks, state markers), committed,
abandoned and pending batch plans (side inputs), batch and rescale metrics (freshness), a lease, and open and
closed transactional ids. `write` makes that content through the store's own calls on a fixed clock, so that a
test can say what each row must read back as.

The fixtures of tests/store_fixtures/ were made by this module as a script, at the commit before the store
became a package with Alembic migrations (the last commit whose `elasticity.checkpoint.store` was one module):

    PYTHONPATH=include:. python -m tests.support.pre_alembic_store \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test

It writes the store into a new SQLite file and dumps it as SQL text (`pre_alembic_store.sqlite.sql`, Python's
`sqlite3` iterdump), and into a new schema of the PostgreSQL database and dumps that schema with `pg_dump
--inserts` (`pre_alembic_store.postgres.sql`, the schema's name taken out: the statements run under any
search_path). Run by a later version it would write a versioned store: the fixtures are not to be made again.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path

from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint, Watermark
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import JobModel, SystemStream, SystemStreamPartition, TaskName

FIXTURES = Path(__file__).resolve().parents[1] / "store_fixtures"
SQLITE_DUMP = FIXTURES / "pre_alembic_store.sqlite.sql"
POSTGRES_DUMP = FIXTURES / "pre_alembic_store.postgres.sql"

JOB = "orders"  # two generations (factor 2, then 4), four batches, a lease, transactional ids
V1_JOB = "clicks"  # CheckpointV1 only, one generation, one committed batch
ORDERS = SystemStream("kafka", "orders")
CLICKS = SystemStream("kafka", "clicks")
PRICES = SystemStreamPartition("kafka", "prices", 0)  # a side input of the orders job's tables
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
LEASE_TTL_MS = 3_600_000


class Clock:
    """The store's clock: a second per reading, from START_MS."""

    def __init__(self) -> None:
        self.now = START_MS

    def __call__(self) -> int:
        self.now += 1000
        return self.now


def model(job: str, stream: SystemStream, factor: int, partitions: int = 2) -> JobModel:
    config = validate({"job.name": job, "task.inputs": str(stream), "job.elasticity.factor": str(factor)})
    return build_job_model(config, {stream: partitions})


def checkpoints(
    m: JobModel, offset: int, *, generation: int, batch: int, stateful: bool = True
) -> dict[TaskName, TaskCheckpoint]:
    """Each task at `offset` plus its partition; a V2 id per task and generation and batch; under a factor above
    2, the watermarks a merge left (one per SSP of bucket 1); with `stateful`, a store's marker."""
    out = {}
    for i, t in enumerate(sorted(m.tasks(), key=lambda t: t.task_name.name)):
        ssps = sorted(t.system_stream_partitions, key=str)
        marks = {s: (Watermark(2, 1, offset + 5),) for s in ssps if s.key_bucket == 1} if len(m.tasks()) > 4 else {}
        out[t.task_name] = TaskCheckpoint(
            task_name=t.task_name,
            offsets={s: offset + s.partition for s in ssps},
            watermarks=marks,
            checkpoint_id=CheckpointId(START_MS + generation * 100_000 + batch * 1000, i),
            state_markers={"counts": {"blobstore": f"snapshot-{generation}-{batch}-{i}"}} if stateful else {},
        )
    return out


def ranges(stream: SystemStream, start: int, end: int) -> tuple[OffsetRange, ...]:
    return tuple(OffsetRange(SystemStreamPartition(stream.system, stream.stream, p), start, end) for p in range(2))


def metrics(batch: int, records: int) -> str:
    return json.dumps({"batch_id": batch, "records": records, "duration_ms": 1500 + batch})


def write(store) -> None:
    """The content, through the store's calls (the store's clock a `Clock`)."""
    m2, m4 = model(JOB, ORDERS, 2), model(JOB, ORDERS, 4)
    store.acquire_lease(JOB, "starter", LEASE_TTL_MS)
    store.write_generation(
        JOB,
        0,
        2,
        model=m2,
        compute=lambda old: checkpoints(m2, 0, generation=1, batch=0),
        owner="starter",
        reason="first start",
        origin="start",
    )
    store.release_lease(JOB, "starter")
    store.record_rescale_metrics(JOB, 1, json.dumps({"job-model-generation-ns": 120_000, "checkpoint-compute-ns": 0}))
    one = store.plan_batch(JOB, 1, ranges(ORDERS, 0, 10), side_inputs=((PRICES, 7),))
    store.commit_batch(one, checkpoints(m2, 10, generation=1, batch=1).values())
    store.record_metrics(JOB, 1, 1, metrics(1, 20), freshness={"oldest": 900, "newest": 120})
    store.plan_batch(JOB, 1, ranges(ORDERS, 10, 20))  # batch 2: abandoned by the rescale
    store.acquire_lease(JOB, "rescaler", LEASE_TTL_MS)
    store.write_generation(
        JOB,
        1,
        4,
        model=m4,
        compute=lambda old: checkpoints(m4, 10, generation=2, batch=1),
        owner="rescaler",
        reason="rescale 2 -> 4",
        abandon_pending=True,
    )
    store.release_lease(JOB, "rescaler")
    store.record_rescale_metrics(JOB, 2, json.dumps({"job-model-generation-ns": 250_000, "checkpoint-compute-ns": 80_000}))
    three = store.plan_batch(JOB, 2, ranges(ORDERS, 10, 30))
    store.commit_batch(three, checkpoints(m4, 30, generation=2, batch=3).values())
    store.record_metrics(JOB, 3, 2, metrics(3, 40), freshness={"oldest": 1800, "newest": 300})
    store.open_transactional_id(JOB, "orders-0-1", "kafka")
    store.close_transactional_ids(JOB, ["orders-0-1"])
    store.open_transactional_id(JOB, "orders-0-3", "kafka")
    store.acquire_lease(JOB, "worker-1", LEASE_TTL_MS)  # a batch running: its lease, its plan pending
    store.plan_batch(JOB, 2, ranges(ORDERS, 30, 45), owner="worker-1")

    m1 = model(V1_JOB, CLICKS, 1)
    store.acquire_lease(V1_JOB, "starter", LEASE_TTL_MS)
    store.write_generation(
        V1_JOB,
        0,
        1,
        model=m1,
        compute=lambda old: checkpoints(m1, 0, generation=1, batch=0, stateful=False),
        owner="starter",
        reason="first start",
        write_versions=(1,),
        origin="start",
    )
    store.release_lease(V1_JOB, "starter")
    plan = store.plan_batch(V1_JOB, 1, ranges(CLICKS, 0, 4))
    store.commit_batch(plan, checkpoints(m1, 4, generation=1, batch=1, stateful=False).values(), write_versions=(1,))
    store.record_metrics(V1_JOB, 1, 1, metrics(1, 8))  # no freshness: no timestamped record


def _open(url: str):
    from elasticity.checkpoint.store import CheckpointStore

    return CheckpointStore(url, clock=Clock())


def make_sqlite_dump() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checkpoints.db"
        store = _open(f"sqlite:///{path}")
        write(store)
        store.close()
        conn = sqlite3.connect(path)
        try:
            return "\n".join(conn.iterdump()) + "\n"
        finally:
            conn.close()


def _pg_statements(dump: str, schema: str) -> Iterable[str]:
    """pg_dump's text without what ties it to the dumped schema, the session's settings and psql."""
    for line in dump.splitlines():
        if not line or line.startswith(("--", "SET ", "\\", "SELECT pg_catalog.set_config", "CREATE SCHEMA")):
            continue
        yield line.replace(f"{schema}.", "")


def make_postgres_dump(url: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    schema = f"pre_alembic_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        store = _open(f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}")
        write(store)
        store.close()
        u = make_url(url)
        dump = subprocess.run(
            [
                "pg_dump",
                "--schema",
                schema,
                "--inserts",
                "--no-owner",
                "--no-privileges",
                "--no-comments",
                "-h",
                u.host or "127.0.0.1",
                "-p",
                str(u.port or 5432),
                "-U",
                u.username or "postgres",
                u.database or "",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
    return "\n".join(_pg_statements(dump, schema)) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="a PostgreSQL database URL to write the PostgreSQL dump with")
    args = parser.parse_args()
    FIXTURES.mkdir(exist_ok=True)
    SQLITE_DUMP.write_text(make_sqlite_dump())
    print(f"wrote {SQLITE_DUMP}")
    if args.postgres:
        POSTGRES_DUMP.write_text(make_postgres_dump(args.postgres))
        print(f"wrote {POSTGRES_DUMP}")


if __name__ == "__main__":
    main()
