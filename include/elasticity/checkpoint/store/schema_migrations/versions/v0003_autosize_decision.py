"""The autosizer's decision kept with the generation it made.

Revision ID: 0003
Revises: 0002

`elasticity_generations.decision`: the DS2 controller's record of a rescale it asked for (the input rate, the
records behind, the demand, the predicted capacity per factor, the useful factor, the scalability
coefficient), as JSON; NULL for every other generation, and for those written before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("elasticity_generations", sa.Column("decision", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("elasticity_generations") as generations:
        generations.drop_column("decision")
