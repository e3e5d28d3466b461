"""failed jobs: the table of the failed-job store
(sql/migrations/0014_failed_jobs.sql).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

from lane_pg.postgres.schema import alembic_downgrade, alembic_upgrade

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    alembic_upgrade(int(revision))


def downgrade() -> None:
    alembic_downgrade(int(revision))
