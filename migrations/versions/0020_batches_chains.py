"""batches_chains: settlements of removed jobs, batch indexes
(sql/migrations/0020_batches_chains.sql).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04
"""

from __future__ import annotations

from lane_pg.postgres.schema import alembic_downgrade, alembic_upgrade

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    alembic_upgrade(int(revision))


def downgrade() -> None:
    alembic_downgrade(int(revision))
