"""storage strikes: failed challenges in a row that did not prove a bad copy, and the
last one's reason, shown with each placement

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("storage_placements") as batch:
        batch.add_column(sa.Column("strikes", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(
            sa.Column("last_failure", sa.String(length=2000), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("storage_placements") as batch:
        batch.drop_column("last_failure")
        batch.drop_column("strikes")
