"""event batches: one lane.events row for the same event of many jobs
(sql/migrations/0007_event_batches.sql).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from lane_pg.postgres.schema import alembic_downgrade, alembic_upgrade

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    alembic_upgrade(int(revision))


def downgrade() -> None:
    alembic_downgrade(int(revision))
