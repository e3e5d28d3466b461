"""The app the storm scenario's workers run (``soak.storm``): one processor, ``noop``.

Its DSN comes from ``$LANE_STORM_DSN`` (the scenario's private server); the workers are
also given ``--dsn``, which carries each one's ``pool_size`` and ``application_name``.
"""

from __future__ import annotations

import os

from lane_pg import App, JobRow
from lane_pg.worker import JobContext

DSN_VARIABLE = "LANE_STORM_DSN"

app = App(os.environ.get(DSN_VARIABLE, "postgresql://postgres@127.0.0.1:5432/soak"))


@app.processor("noop")
async def noop(job: JobRow, ctx: JobContext) -> None:
    return None
