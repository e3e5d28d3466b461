"""Typed job classes through the ``Q`` facade, run by ``python -m lane_pg worker``.

    python examples/facade_app.py                            # push five jobs
    python -m lane_pg worker --app examples.facade_app --burst

Importing this module registers both job classes (``register_job``), so the worker started
with ``--app examples.facade_app`` runs them; ``bootstrap_from_env()`` points ``Q`` at
``$LANE_PG_DSN`` (else the embedded server in ./.lane_pg), where the worker claims.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from datetime import timedelta

from lane_pg import Job, Q, bootstrap_from_env, register_job


@dataclass
class SendWelcomeEmail(Job):
    job_name = "SendWelcomeEmail"
    queue = "facade-mail"
    max_tries = 5
    user_id: int

    def unique_id(self) -> str:  # the key of Q.push_unique: one welcome per user at a time
        return str(self.user_id)

    async def handle(self) -> dict[str, int]:
        print(f"welcome mail for user {self.user_id}", flush=True)
        return {"welcomed": self.user_id}


@dataclass
class BuildInvoice(Job):
    job_name = "BuildInvoice"
    queue = "facade-billing"
    max_tries = 2
    order: int
    lines: list[int]

    async def handle(self) -> int:
        total = sum(self.lines)
        print(f"invoice for order {self.order}: {total}", flush=True)
        return total


register_job(SendWelcomeEmail)
register_job(BuildInvoice)


async def main() -> int:
    from lane_pg.postgres.embedded import resolve_dsn
    from lane_pg.postgres.schema import migrate

    await migrate(resolve_dsn(None))  # idempotent
    bootstrap_from_env()
    try:
        pushed = [
            await Q.push(SendWelcomeEmail(user_id=42)),
            await Q.later(timedelta(milliseconds=200), SendWelcomeEmail(user_id=7)),
            await Q.push(BuildInvoice(order=1001, lines=[250, 100])),
            await Q.push(BuildInvoice(order=1002, lines=[75])),
        ]
        first = await Q.push_unique(SendWelcomeEmail(user_id=99))  # takes the lock
        again = await Q.push_unique(SendWelcomeEmail(user_id=99))  # held: suppressed
        print(f"pushed {len(pushed) + first} jobs: {', '.join(pushed)}")
        print(f"push_unique for user 99: {first} then {again}")
        print("run them: python -m lane_pg worker --app examples.facade_app --burst")
    finally:
        await Q.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
