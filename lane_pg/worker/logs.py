"""Log output: lane_pg logs through the standard ``logging`` module only, under the
``lane_pg`` logger names (``lane_pg.jobs``: one line per job event; ``lane_pg.worker``: the
worker itself), so an application's logging configuration, Sentry's logging integration and
the usual handlers see every line. Per-job records carry their fields as attributes
(``extra=``): ``queue``, ``job_id``, ``job_name``, ``attempt``, ``max_attempts``,
``error``, ``next_run_at``, ``duration_ms``, ``worker``.

This module holds the two formats the command line offers (``--log-format text|json``) and
``configure_cli_logging``, which the CLI calls; an application that runs its worker itself
configures logging as it likes (``JsonFormatter`` is usable there too).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

LOG_FORMATS = ("text", "json")

JOB_FIELDS: tuple[tuple[str, str], ...] = (
    ("queue", "queue"),
    ("job_id", "job_id"),
    ("job_name", "name"),
    ("attempt", "attempt"),
    ("max_attempts", "max_attempts"),
    ("error", "error"),
    ("next_run_at", "next_run_at"),
    ("duration_ms", "duration_ms"),
    ("worker", "worker"),
)
"""Record attribute -> JSON key (``name`` is the logger's own attribute on a record, so the
job's name travels as ``job_name``)."""

TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
"""As before the JSON format existed (tests and users grep for lines starting with the
level); a log collector adds its own timestamps, and --log-format json carries `ts`."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, the job fields a record carries, and ``traceback`` when it has one."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for attribute, key in JOB_FIELDS:
            value = record.__dict__.get(attribute)
            if value is not None:
                doc[key] = value
        if record.exc_info:
            doc["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["traceback"] = record.exc_text
        return json.dumps(doc, default=str)


def formatter(log_format: str) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


class _OneLineRetry(logging.Filter):
    """asyncpg (0.32) logs every failed attempt to refill a pool to its minimum size with a
    full traceback, about four per process while the server restarts (the soak counted 24
    tracebacks in one worker's log): the cause goes on the line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({type(error).__name__}: {error})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def _quiet_pool_floor_retries() -> None:
    pool_log = logging.getLogger("asyncpg.pool")
    if not any(isinstance(f, _OneLineRetry) for f in pool_log.filters):
        pool_log.addFilter(_OneLineRetry())


def configure_cli_logging(verbose: bool, log_format: str = "text") -> None:
    """The command line's logging: a stderr handler on the root logger, WARNING and above
    (INFO with ``verbose``), in ``log_format``.

    Called once the ``--app`` module is imported: an app that configured logging itself
    (the root logger has handlers) keeps its configuration, and ``verbose`` only lowers the
    ``lane_pg`` loggers to INFO; an explicit ``--log-format json`` then sends lane_pg's own
    lines to stderr as JSON instead of through the app's handlers. Configured before the
    import, as it used to be, an app's own ``logging.basicConfig`` did nothing."""
    level = logging.INFO if verbose else logging.WARNING
    _quiet_pool_floor_retries()
    root = logging.getLogger()
    package = logging.getLogger("lane_pg")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter(log_format))
        root.addHandler(handler)
        root.setLevel(level)
        return
    if verbose and package.getEffectiveLevel() > logging.INFO:
        package.setLevel(logging.INFO)
    if log_format == "json":
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        package.addHandler(handler)
        package.propagate = False
        if package.level == logging.NOTSET:
            package.setLevel(level)
