"""Enqueue inside your own psycopg transaction: the order and its job commit together.

    python examples/tx_psycopg.py

``add_job_sync`` runs ``lane.add_job`` on *your* connection, in *your* transaction: the job
row, its events and the NOTIFY that wakes workers become visible when you commit and vanish
if you roll back. No worker can ever see a receipt job for an order that does not exist,
and no committed order lacks its receipt job.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import psycopg

from lane_pg import JobOptions
from lane_pg.postgres.embedded import resolve_dsn
from lane_pg.postgres.enqueue import add_job_sync
from lane_pg.postgres.schema import migrate

QUEUE = "receipts"

CREATE_ORDERS = """
CREATE TABLE IF NOT EXISTS orders (
    id          bigserial PRIMARY KEY,
    customer    text NOT NULL,
    total_cents integer NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
)"""


class PaymentDeclined(Exception):
    def __init__(self, order_id: str, total_cents: int) -> None:
        super().__init__(f"payment of {total_cents} cents for order {order_id} declined")
        self.order_id = order_id


def place_order(conn: psycopg.Connection[Any], customer: str, total_cents: int) -> str:
    """Insert an order and enqueue its receipt in one transaction; returns the order id."""
    with conn.transaction():  # BEGIN ... COMMIT, or ROLLBACK if the block raises
        row = conn.execute(
            "INSERT INTO orders (customer, total_cents) VALUES (%s, %s) RETURNING id",
            (customer, total_cents),
        ).fetchone()
        assert row is not None
        order_id = str(row[0])
        # The job id doubles as an idempotency key: adding "receipt:<order>" again returns
        # the existing job instead of a second one.
        add_job_sync(
            conn,
            QUEUE,
            "send_receipt",
            {"order_id": row[0], "customer": customer},
            JobOptions(job_id=f"receipt:{order_id}", attempts=5),
        )
        if total_cents > 100_000:
            raise PaymentDeclined(order_id, total_cents)  # after both writes: all undone
    return order_id


def describe(conn: psycopg.Connection[Any], order_id: str) -> tuple[int, str | None]:
    """How many order rows have this id, and the state of its receipt job (None: no job)."""
    orders = conn.execute("SELECT count(*) FROM orders WHERE id = %s", (int(order_id),))
    (count,) = orders.fetchone() or (0,)
    state = conn.execute(
        "SELECT lane.get_job_state(%s, %s)", (QUEUE, f"receipt:{order_id}")
    ).fetchone()
    return int(count), None if state is None else state[0]


def main() -> int:
    dsn = resolve_dsn(None)  # $LANE_PG_DSN, else the embedded server in ./.lane_pg
    asyncio.run(migrate(dsn))  # idempotent; in production run `python -m lane_pg migrate`
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(CREATE_ORDERS)

        order_id = place_order(conn, "ada@example.com", 4_200)
        orders, job_state = describe(conn, order_id)
        print(
            f"committed:   order {order_id} ({orders} row) + job receipt:{order_id} "
            f"on queue {QUEUE!r} ({job_state})"
        )
        ok = orders == 1 and job_state == "waiting"

        try:
            place_order(conn, "grace@example.com", 250_000)
        except PaymentDeclined as exc:
            print(f"rolled back: {exc}")
            orders, job_state = describe(conn, exc.order_id)
            print(
                f"             order {exc.order_id}: {orders} rows, "
                f"job receipt:{exc.order_id}: {job_state or 'none'}"
            )
        else:
            raise AssertionError("the second payment was expected to be declined")
        ok = ok and orders == 0 and job_state is None

    print("a worker serving queue 'receipts' sees only the committed order's job")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
