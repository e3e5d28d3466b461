"""pause_all: the connection-wide pause and the restart signal
(sql/migrations/0017_pause_all.sql).

Revision ID: 0017
Revises: 0015 (0016 once the branch holding it is merged)
Create Date: 2026-12-01
"""

from __future__ import annotations

from lane_pg.postgres.schema import alembic_downgrade, alembic_upgrade

revision: str = "0017"
down_revision: str | None = "0015"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    alembic_upgrade(int(revision))


def downgrade() -> None:
    alembic_downgrade(int(revision))
