"""Replays: a generation that reprocesses the input from a time or the earliest offset says so.

Revision ID: 0003
Revises: 0002

`elasticity_generations.replay`: the replay a generation starts (`elasticity.checkpoint.replay.Replay` as JSON:
the requested time, the output mode, where each input partition starts, and the previous version's last
checkpoints), what data quality and the job page read back. NULL for every other generation, existing rows too.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("elasticity_generations", sa.Column("replay", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("elasticity_generations") as generations:
        generations.drop_column("replay")
