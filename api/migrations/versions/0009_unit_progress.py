"""unit progress: what a unit's lease last reported by heartbeat (progress 0..1 and a
message), shown per unit and counted in its job's progress

Revision ID: 0009
Revises: 0008
Create Date: 2025-01-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("job_units", schema=None) as batch_op:
        # Existing units start with nothing reported, as a freshly leased unit does.
        batch_op.add_column(sa.Column("progress", sa.Float(), nullable=False, server_default="0"))
        batch_op.add_column(
            sa.Column("progress_message", sa.String(length=500), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("job_units", schema=None) as batch_op:
        batch_op.drop_column("progress_message")
        batch_op.drop_column("progress")
