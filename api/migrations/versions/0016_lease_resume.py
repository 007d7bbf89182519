"""lease resume: the lost lease a whole-job lease resumed and the checkpoint it resumed at
(a long job resumes from the last committed checkpoint, not step 0)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("resumed_lease_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("resumed_at", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.drop_column("resumed_at")
        batch_op.drop_column("resumed_lease_id")
