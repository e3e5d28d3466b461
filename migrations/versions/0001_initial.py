"""initial: every table of the storage model (sql/migrations/0001_initial.sql).

Revision ID: 0001
Revises:
Create Date: 2025-11-30
"""

from __future__ import annotations

from lane_pg.postgres.schema import alembic_downgrade, alembic_upgrade

revision: str = "0001"
down_revision: str | None = None
branch_labels: tuple[str, ...] | None = ("lane_pg",)
depends_on: str | None = None


def upgrade() -> None:
    alembic_upgrade(int(revision))


def downgrade() -> None:
    alembic_downgrade(int(revision))
