"""Attempts fenced apart, and what data quality and the job page read back kept in the store.

Revision ID: 0002
Revises: 0001

Production Airflow runs each task attempt on whichever worker takes it, with no disk shared between them:
- `elasticity_jobs.lease_epoch`, bumped whenever the lease passes to another owner: every attempt takes the
  lease with a token of its own, and a superseded attempt's writes are refused (existing rows start at 0);
- the data-quality edge and the index of data-quality runs, until now files of the worker that ran the check;
- each task attempt's failure and each Spark Connect server's health, until now files of the worker or of
  the API server.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("elasticity_jobs", sa.Column("lease_epoch", sa.BigInteger, nullable=False, server_default="0"))
    op.create_table(
        "elasticity_quality_edges",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("last_batch", sa.BigInteger, nullable=False),
        sa.Column("edge", sa.Text, nullable=False),
        sa.Column("positions", sa.LargeBinary, nullable=False),
        sa.Column("state", sa.LargeBinary),
        sa.Column("kafka_positions", sa.LargeBinary),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "elasticity_quality_runs",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("seq", sa.BigInteger, primary_key=True),
        sa.Column("run", sa.String(255), nullable=False),
        sa.Column("report", sa.Text, nullable=False),
        sa.Column("window", sa.Text, nullable=False),
        sa.Column("success", sa.Boolean, nullable=False),
        sa.Column("checks", sa.Text, nullable=False),
        sa.Column("finished_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "elasticity_attempt_failures",
        sa.Column("job_name", sa.String(255), primary_key=True),
        sa.Column("run_id", sa.String(255), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("task", sa.String(64), nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "elasticity_engine_health",
        sa.Column("address", sa.String(512), primary_key=True),
        sa.Column("reachable", sa.Boolean, nullable=False),
        sa.Column("since_ms", sa.BigInteger, nullable=False),
        sa.Column("checked_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "elasticity_engine_health",
        "elasticity_attempt_failures",
        "elasticity_quality_runs",
        "elasticity_quality_edges",
    ):
        op.drop_table(table)
    with op.batch_alter_table("elasticity_jobs") as jobs:
        jobs.drop_column("lease_epoch")
