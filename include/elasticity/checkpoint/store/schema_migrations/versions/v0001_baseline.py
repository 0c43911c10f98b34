"""Baseline: the store's tables as they were when the store had no schema versions.

Revision ID: 0001
Revises: (none)

A new store gets every table. A store written before versions (it has tables, no version table) was kept
current by `create_all` and hand-written ALTERs on every open; whatever its layout, it is brought here: the
tables it lacks (batch metrics, rescale metrics and transactional ids came after the first), and the nullable
columns and the index added since (generations.origin, batches.side_inputs, batch_metrics' freshness pair and
its created_ms index). No row is touched; the added columns are NULL in existing rows, as before.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

BATCH_METRICS_INDEX = "ix_elasticity_batch_metrics_created"


def _jobs() -> None:
    op.create_table(
        "elasticity_jobs",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("lease_owner", sa.String(255)),
        sa.Column("lease_expires_ms", sa.BigInteger),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
    )


def _generations() -> None:
    op.create_table(
        "elasticity_generations",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("generation", sa.Integer, primary_key=True),
        sa.Column("factor", sa.Integer, nullable=False),
        sa.Column("job_model", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("origin", sa.String(32)),
    )


def _checkpoints() -> None:
    op.create_table(
        "elasticity_checkpoints",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("job_name", sa.String(255), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("task_name", sa.String(1024), nullable=False),
        sa.Column("version", sa.SmallInteger, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("watermarks", sa.Text),
        sa.Column("batch_id", sa.BigInteger),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Index("ix_elasticity_checkpoints_task", "job_name", "generation", "task_name", "version", "id"),
    )


def _batches() -> None:
    op.create_table(
        "elasticity_batches",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("batch_id", sa.BigInteger, primary_key=True),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("ranges", sa.Text, nullable=False),
        sa.Column("side_inputs", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("planned_ms", sa.BigInteger, nullable=False),
        sa.Column("committed_ms", sa.BigInteger),
    )


def _batch_metrics() -> None:
    op.create_table(
        "elasticity_batch_metrics",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("batch_id", sa.BigInteger, primary_key=True),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("metrics", sa.Text, nullable=False),
        sa.Column("freshness_oldest_ms", sa.BigInteger),
        sa.Column("freshness_newest_ms", sa.BigInteger),
        sa.Index(BATCH_METRICS_INDEX, "job_name", "created_ms"),
    )


def _rescale_metrics() -> None:
    op.create_table(
        "elasticity_rescale_metrics",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("generation", sa.Integer, primary_key=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("metrics", sa.Text, nullable=False),
    )


def _transactions() -> None:
    op.create_table(
        "elasticity_transactions",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("transactional_id", sa.String(512), primary_key=True),
        sa.Column("system", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )


TABLES: dict[str, Callable[[], None]] = {
    "elasticity_jobs": _jobs,
    "elasticity_generations": _generations,
    "elasticity_checkpoints": _checkpoints,
    "elasticity_batches": _batches,
    "elasticity_batch_metrics": _batch_metrics,
    "elasticity_rescale_metrics": _rescale_metrics,
    "elasticity_transactions": _transactions,
}

LATER_COLUMNS = (  # nullable columns a table gained after its first layout: (table, column, type)
    ("elasticity_generations", "origin", sa.String(32)),
    ("elasticity_batches", "side_inputs", sa.Text()),
    ("elasticity_batch_metrics", "freshness_oldest_ms", sa.BigInteger()),
    ("elasticity_batch_metrics", "freshness_newest_ms", sa.BigInteger()),
)


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    existing = set(inspector.get_table_names())
    for name, create in TABLES.items():
        if name not in existing:
            create()
    for table, name, type_ in LATER_COLUMNS:
        if table in existing and name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, sa.Column(name, type_))
    metrics = "elasticity_batch_metrics"
    if metrics in existing and BATCH_METRICS_INDEX not in {ix["name"] for ix in inspector.get_indexes(metrics)}:
        op.create_index(BATCH_METRICS_INDEX, metrics, ["job_name", "created_ms"])


def downgrade() -> None:
    """Back to a store without versions (Alembic removes the version): the tables and rows stay, as the code
    before versions reads them."""
