"""Enqueue inside a SQLAlchemy Core transaction: the order and its job commit together.

    python examples/tx_sqlalchemy.py

``engine.begin()`` opens a transaction and commits it when the block ends (or rolls it
back when the block raises). ``add_job_sync`` runs ``lane.add_job`` on that same
connection, so the job, its events and the wake-up NOTIFY share the order's fate. A
``Session`` works the same way: ``add_job_sync(session, ...)`` inside ``session.begin()``.
"""

from __future__ import annotations

import asyncio
import sys

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Integer,
    MetaData,
    Table,
    Text,
    create_engine,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.engine import make_url

from lane_pg import JobOptions
from lane_pg.postgres.embedded import resolve_dsn
from lane_pg.postgres.enqueue import add_job_sync
from lane_pg.postgres.schema import migrate

QUEUE = "receipts"

metadata = MetaData()
orders = Table(  # the same table as examples/tx_psycopg.py
    "orders",
    metadata,
    Column("id", BigInteger, primary_key=True),  # bigserial
    Column("customer", Text, nullable=False),
    Column("total_cents", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)


class PaymentDeclined(Exception):
    def __init__(self, order_id: int, total_cents: int) -> None:
        super().__init__(f"payment of {total_cents} cents for order {order_id} declined")
        self.order_id = order_id


def place_order(conn: Connection, customer: str, total_cents: int) -> int:
    """Insert an order and enqueue its receipt on ``conn`` (inside its transaction)."""
    order_id: int = conn.execute(
        insert(orders).values(customer=customer, total_cents=total_cents).returning(orders.c.id)
    ).scalar_one()
    # "receipt:<order>" is the job id and the idempotency key: adding it twice returns the
    # first job.
    add_job_sync(
        conn,
        QUEUE,
        "send_receipt",
        {"order_id": order_id, "customer": customer},
        JobOptions(job_id=f"receipt:{order_id}", attempts=5),
    )
    if total_cents > 100_000:
        raise PaymentDeclined(order_id, total_cents)  # after both writes: all undone
    return order_id


def describe(conn: Connection, order_id: int) -> tuple[int, str | None]:
    """How many order rows have this id, and the state of its receipt job (None: no job)."""
    count = conn.execute(
        select(func.count()).select_from(orders).where(orders.c.id == order_id)
    ).scalar_one()
    state = conn.execute(
        text("SELECT lane.get_job_state(:queue, :id)"),
        {"queue": QUEUE, "id": f"receipt:{order_id}"},
    ).scalar()
    return int(count), state


def main() -> int:
    dsn = resolve_dsn(None)  # $LANE_PG_DSN, else the embedded server in ./.lane_pg
    asyncio.run(migrate(dsn))  # idempotent; in production run `python -m lane_pg migrate`
    # A postgresql:// DSN on SQLAlchemy's psycopg (3) driver.
    engine = create_engine(make_url(dsn).set(drivername="postgresql+psycopg"))
    try:
        metadata.create_all(engine)  # CREATE TABLE orders, if it is missing

        with engine.begin() as conn:  # BEGIN ... COMMIT
            order_id = place_order(conn, "ada@example.com", 4_200)
        with engine.connect() as conn:
            count, job_state = describe(conn, order_id)
        print(
            f"committed:   order {order_id} ({count} row) + job receipt:{order_id} "
            f"on queue {QUEUE!r} ({job_state})"
        )
        ok = count == 1 and job_state == "waiting"

        try:
            with engine.begin() as conn:  # BEGIN ... ROLLBACK (the block raises)
                place_order(conn, "grace@example.com", 250_000)
        except PaymentDeclined as exc:
            print(f"rolled back: {exc}")
            with engine.connect() as conn:
                count, job_state = describe(conn, exc.order_id)
            print(
                f"             order {exc.order_id}: {count} rows, "
                f"job receipt:{exc.order_id}: {job_state or 'none'}"
            )
            ok = ok and count == 0 and job_state is None
        else:
            raise AssertionError("the second payment was expected to be declined")
    finally:
        engine.dispose()

    print("a worker serving queue 'receipts' sees only the committed order's job")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
