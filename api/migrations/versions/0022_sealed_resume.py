"""sealed resume: a lease that resumed a sealed checkpoint, and the submitter's resume grant
(the checkpoint's content keys wrapped for the new provider; the API cannot open them)

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("resume_sealed", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("resume_grants", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.drop_column("resume_grants")
        batch_op.drop_column("resume_sealed")
