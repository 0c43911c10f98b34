"""The autosizer's decision kept with the generation it made, and a rescale's request for the lease.

Revision ID: 0004
Revises: 0003

`elasticity_generations.decision`: the DS2 controller's record of a rescale it asked for (the input rate, the
records behind, the demand, the predicted capacity per factor, the useful factor, the scalability
coefficient), as JSON; NULL for every other generation, and for those written before.
`elasticity_jobs.lease_wanted_ms`: when a rescale waiting for the lease last asked for it; a run of batches
that sees a recent request ends after its batch, so a rescale under a load the job cannot catch up with
waits for one batch, not for the run's `airflow.microbatch.max.seconds`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("elasticity_generations", sa.Column("decision", sa.Text))
    op.add_column("elasticity_jobs", sa.Column("lease_wanted_ms", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("elasticity_generations") as generations:
        generations.drop_column("decision")
    with op.batch_alter_table("elasticity_jobs") as jobs:
        jobs.drop_column("lease_wanted_ms")
