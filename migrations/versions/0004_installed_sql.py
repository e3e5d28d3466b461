"""installed sql: the table recording the fingerprints and definitions of the functions and
views the database runs (sql/migrations/0004_installed_sql.sql).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from lane_pg.postgres.schema import alembic_downgrade, alembic_upgrade

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    alembic_upgrade(int(revision))


def downgrade() -> None:
    alembic_downgrade(int(revision))
