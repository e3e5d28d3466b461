"""The worker command's logging: asyncpg's retries to refill a pool during an outage
reach stderr as one line naming the cause, not a traceback each."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import logging
from lane_pg.worker.logs import configure_cli_logging
configure_cli_logging(verbose=False)
try:
    raise ConnectionResetError(104, "Connection reset by peer")
except ConnectionResetError:
    logging.getLogger("asyncpg.pool").warning(
        "Failed to restore the pool connection floor; retrying", exc_info=True)
try:
    raise ValueError("a bug of the app")
except ValueError:
    logging.getLogger("myapp").exception("the app's own error keeps its traceback")
"""


def test_pool_floor_retries_are_one_line_and_other_tracebacks_stay() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    lines = done.stderr.splitlines()
    retry = [line for line in lines if "pool connection floor" in line]
    assert retry == [
        "WARNING asyncpg.pool: Failed to restore the pool connection floor; retrying"
        " (ConnectionResetError: [Errno 104] Connection reset by peer)"
    ]
    assert done.stderr.count("Traceback") == 1  # the app's own exception only
    assert "ValueError: a bug of the app" in done.stderr
