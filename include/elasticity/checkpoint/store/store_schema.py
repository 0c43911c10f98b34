"""The checkpoint store's tables, as the latest migration (`HEAD_REVISION`) leaves them.

A new store is made from these tables; a store written by an earlier version is brought to them by the
revisions of `schema_migrations/versions/` (`schema_upgrade`). So a change here is a new revision too, its
`down_revision` the current head, and `HEAD_REVISION` set to it; tests/unit/test_store_schema.py checks that
the revisions build exactly these tables.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
)

HEAD_REVISION = "0004"
"""The newest revision of schema_migrations/versions/: a store whose version table holds it is opened as it is."""

VERSION_TABLE = "elasticity_alembic_version"
"""Alembic's version table, named like the store's own tables (a database may hold another application's
`alembic_version`, Airflow's among them)."""

version = Table(  # as Alembic makes it (MigrationContext's version table), outside `metadata`: not a table of the store's
    VERSION_TABLE,
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
)

metadata = MetaData()

jobs = Table(
    "elasticity_jobs",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("generation", Integer, nullable=False),  # 0: no generation yet
    Column("lease_owner", String(255)),
    Column("lease_expires_ms", BigInteger),
    Column("updated_ms", BigInteger, nullable=False),
    # when a rescale last asked for the lease: a run of batches ends at its next batch's end rather than at caught-up
    Column("lease_wanted_ms", BigInteger),
    # bumped each time the lease passes to another owner (each attempt is one): the fencing token's epoch
    Column("lease_epoch", BigInteger, nullable=False, server_default="0"),
)

generations = Table(
    "elasticity_generations",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("factor", Integer, nullable=False),
    Column("job_model", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("origin", String(32)),  # who asked: manual | schedule | autosize | start | partitions | replay
    Column("replay", Text),  # JSON (checkpoint.replay.Replay) of a replay's generation; NULL for every other
    Column("decision", Text),  # the autosizer's decision and what it decided from, as JSON (NULL: none)
)

checkpoints = Table(
    "elasticity_checkpoints",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("job_name", String(255), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("task_name", String(1024), nullable=False),
    Column("version", SmallInteger, nullable=False),
    Column("payload", Text, nullable=False),  # Samza's CheckpointV1 / CheckpointV2 JSON
    Column("watermarks", Text),
    Column("batch_id", BigInteger),
    Column("created_ms", BigInteger, nullable=False),
    Index("ix_elasticity_checkpoints_task", "job_name", "generation", "task_name", "version", "id"),
)

CHECKPOINT_COLUMNS = ("job_name", "generation", "task_name", "version", "payload", "watermarks", "batch_id", "created_ms")

batches = Table(
    "elasticity_batches",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("batch_id", BigInteger, primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("ranges", Text, nullable=False),
    Column("side_inputs", Text),  # JSON [[ssp key, read-up-to offset], ...] of the tables' side inputs
    Column("status", String(16), nullable=False),  # a BatchStatus
    Column("planned_ms", BigInteger, nullable=False),
    Column("committed_ms", BigInteger),
)


batch_metrics = Table(
    "elasticity_batch_metrics",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("batch_id", BigInteger, primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("metrics", Text, nullable=False),  # JSON: the batch summary and SEP-32's metrics
    # the summary's freshness_ms, as columns: the job page's percentiles over an hour read no JSON
    Column("freshness_oldest_ms", BigInteger),
    Column("freshness_newest_ms", BigInteger),
    Index("ix_elasticity_batch_metrics_created", "job_name", "created_ms"),
)

rescale_metrics = Table(
    "elasticity_rescale_metrics",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("metrics", Text, nullable=False),  # JSON: SEP-32's job-model-generation-ns and checkpoint-compute-ns of the rescale
)

transactions = Table(  # each run's Kafka transactional.id, written before the run uses it (exactly-once outputs)
    "elasticity_transactions",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("transactional_id", String(512), primary_key=True),
    Column("system", String(255), nullable=False),  # the Kafka system the run's outputs and commit records go to
    Column("state", String(16), nullable=False),  # open: may hold a transaction | closed: fenced or ended cleanly
    Column("created_ms", BigInteger, nullable=False),
)


quality_edges = Table(  # where incremental data quality stands for a job (quality/cursor.py), one row replaced whole
    "elasticity_quality_edges",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("last_batch", BigInteger, nullable=False),
    Column("edge", Text, nullable=False),  # JSON: the factor, checkpoints and Kafka edges the last passing run left
    Column("positions", LargeBinary, nullable=False),  # Parquet: each key's last validated record
    Column("state", LargeBinary),  # Parquet: each store's expected value per key (a stateful app)
    Column("kafka_positions", LargeBinary),  # Parquet: per key the last validated exactly-once output
    Column("updated_ms", BigInteger, nullable=False),
)

quality_runs = Table(  # the data-quality runs' index (quality/history.py), newest last; retention removes rows
    "elasticity_quality_runs",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("run", String(255), nullable=False),
    Column("report", Text, nullable=False),  # where the run's report and Data Docs are: an object-store URI or a folder
    Column("window", Text, nullable=False),  # JSON
    Column("success", Boolean, nullable=False),
    Column("checks", Text, nullable=False),  # JSON: each check's name, success, rows, unexpected, describe
    Column("finished_ms", BigInteger, nullable=False),
)

attempt_failures = Table(  # a task attempt's failure in one line (airflow/health.py), whichever worker ran it
    "elasticity_attempt_failures",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("run_id", String(255), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("task", String(64), nullable=False),  # run_batches | rescale | quality | maintenance
    Column("error", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
)

engine_health = Table(  # whether each Spark Connect server answered the last probe, and since when
    "elasticity_engine_health",
    metadata,
    Column("address", String(512), primary_key=True),
    Column("reachable", Boolean, nullable=False),
    Column("since_ms", BigInteger, nullable=False),
    Column("checked_ms", BigInteger, nullable=False),
)
