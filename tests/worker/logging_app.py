"""Apps for the worker-output tests (``tests/worker/test_job_logging.py``).

``app``: processors that fail, complete, or run as plain ``def`` in a thread.
``logging_app``: the same, in a module that configures logging itself at import (DEBUG,
its own format), as an application does: the worker must keep that configuration.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from lane_pg import App
from lane_pg.types import JSON, JobRow
from lane_pg.worker import JobContext

if TYPE_CHECKING:
    from lane_pg.worker.context import SyncJobContext


async def bad_address(job: JobRow, ctx: JobContext) -> JSON:
    raise ValueError(f"bad address {job.payload!r}")


async def ok(job: JobRow, ctx: JobContext) -> JSON:
    return {"pid": os.getpid()}


def sync_ok(job: JobRow, ctx: SyncJobContext) -> JSON:
    ctx.update_progress({"thread": threading.current_thread().name})
    return {"pid": os.getpid(), "thread": threading.current_thread().name}


def sync_forever(job: JobRow, ctx: SyncJobContext) -> JSON:
    """Never returns on its own: sleeps in slices, ignoring its cancellation."""
    ctx.update_progress("started")
    while True:
        time.sleep(0.05)


def _register(target: App) -> App:
    target.processor("sync_forever")(sync_forever)
    target.processor("bad_address")(bad_address)
    target.processor("ok")(ok)
    target.processor("sync_ok")(sync_ok)
    return target


app = _register(App())

if os.environ.get("LANE_PG_TEST_APP_LOGGING") == "1":
    logging.basicConfig(level=logging.DEBUG, format="APP %(levelname)s %(name)s | %(message)s")
