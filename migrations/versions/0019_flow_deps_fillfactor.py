"""flow_deps_fillfactor: room on each page for every dependency row's completion
(sql/migrations/0019_flow_deps_fillfactor.sql).

Revision ID: 0019
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

from lane_pg.postgres.schema import alembic_downgrade, alembic_upgrade

revision: str = "0019"
down_revision: str | None = "0017"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    alembic_upgrade(int(revision))


def downgrade() -> None:
    alembic_downgrade(int(revision))
