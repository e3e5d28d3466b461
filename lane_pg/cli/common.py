"""Helpers shared by the CLI commands: common options, DSN handling, error text."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from lane_pg.backend.url import redact_url
from lane_pg.errors import ConfigurationError

if TYPE_CHECKING:
    from lane_pg.backend import JobQueueBackend
    from lane_pg.facade import Connection, QueueFacade

DEFAULT_SCHEMA = "lane"

DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
DURATION_PATTERN = r"(?P<amount>[0-9]+(?:\.[0-9]+)?)?(?P<unit>ms|s|m|h|d)"
"""A duration as the commands write it: an amount and a unit (``500ms``, ``30s``, ``1.5h``,
``7d``); without an amount, one unit (``s``). ``parse_duration`` reads a match of it."""
_DURATION = re.compile(DURATION_PATTERN)
DURATION_EXAMPLES = "500ms, 30s, 15m, 1h or 7d"
_BARE_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


class CommandError(Exception):
    """An expected failure of a command: printed as one line, exit code 1."""


def duration_of(match: re.Match[str], option: str, text: str) -> timedelta:
    """The duration a match of ``DURATION_PATTERN`` names, in whole milliseconds."""
    amount = float(match["amount"]) if match["amount"] else 1.0
    millis = amount * DURATION_UNITS_MS[match["unit"]]
    if millis != int(millis):
        raise CommandError(f"{option} {text!r}: the duration must be whole milliseconds")
    return timedelta(milliseconds=int(millis))


MAX_COUNT = 2**31 - 1
"""The largest count an option takes (integer arguments of the stored functions)."""


def parse_count(text: str, option: str, meaning: str = "a count") -> int:
    """A whole number from 0 to ``MAX_COUNT``; errors name ``option`` and say ``meaning``."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or int(value) > MAX_COUNT:
        raise CommandError(f"{option} {text!r}: expected {meaning} (0 to {MAX_COUNT})")
    return int(value)


def parse_duration(text: str, option: str) -> timedelta:
    """``500ms``, ``30s``, ``15m``, ``1.5h``, ``7d``; errors name ``option``."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise CommandError(
            f"{option} {text!r}: expected a duration such as 500ms, 30s, 15m, 1h or 7d"
        )
    return duration_of(match, option, text)


def duration_option(bare_unit: str, result_unit: str = "s") -> Callable[[str], float]:
    """An argparse ``type``: a duration (``500ms``, ``30s``, ``15m``, ``1h``, ``7d``) as a
    number of ``result_unit``; a bare number is read in ``bare_unit``, the option's unit
    before durations were accepted (``--poll-interval 500`` stays 500 milliseconds)."""

    def parse(text: str) -> float:
        value = text.strip()
        if _BARE_NUMBER.fullmatch(value):
            value += bare_unit
        match = _DURATION.fullmatch(value)
        if match is None or match["amount"] is None:
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected a duration such as {DURATION_EXAMPLES}"
                f" (a bare number is {_UNIT_NAMES[bare_unit]})"
            )
        amount = float(match["amount"]) * DURATION_UNITS_MS[match["unit"]]
        return amount / DURATION_UNITS_MS[result_unit]

    parse.__name__ = "duration"  # argparse names the type in its errors
    return parse


_UNIT_NAMES = {
    "ms": "milliseconds",
    "s": "seconds",
    "m": "minutes",
    "h": "hours",
    "d": "days",
}


def format_duration(milliseconds: int) -> str:
    """``milliseconds`` in the duration syntax the options take: the largest unit that
    divides it (``90000`` is ``90s``, ``3600000`` is ``1h``)."""
    for unit in ("d", "h", "m", "s"):
        size = DURATION_UNITS_MS[unit]
        if milliseconds and milliseconds % size == 0:
            return f"{milliseconds // size}{unit}"
    return f"{milliseconds}ms"


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dsn`` and ``--schema``, with their environment defaults."""
    parser.add_argument(
        "--dsn",
        default=None,
        help="the PostgreSQL to use: a URL (postgresql://user:password@host:5432/dbname) or"
        " libpq keywords ('host=db dbname=app user=me'); default: $LANE_PG_DSN, else the"
        " embedded server with its data in ./.lane_pg (said on the first line)",
    )
    parser.add_argument(
        "--schema",
        default=os.environ.get("LANE_PG_SCHEMA") or DEFAULT_SCHEMA,
        help="schema holding lane_pg's tables (default: $LANE_PG_SCHEMA or 'lane')",
    )


def add_connection_name_argument(parser: argparse.ArgumentParser) -> None:
    """``--connection NAME``: a facade connection (CLI-2); default: the default one."""
    parser.add_argument(
        "--connection",
        default=None,
        metavar="NAME",
        help="the queue connection to use (default: the default connection); an unknown"
        " name exits non-zero",
    )


def keyword_dsn_to_url(dsn: str) -> str:
    """A libpq keyword DSN (``host=db port=5432 dbname=app user=me``) as the
    ``postgresql://`` URL every driver here reads; any other text is returned as it is."""
    text = dsn.strip()
    if not text or "://" in text or "=" not in text:
        return dsn
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    try:
        params = {k: str(v) for k, v in conninfo_to_dict(text).items() if v is not None}
    except Exception as exc:  # psycopg.ProgrammingError: libpq's own message
        raise ConfigurationError(
            f"invalid DSN {redact_keyword_dsn(text)!r}: {describe_error(exc)}"
        ) from exc
    user, password = params.pop("user", ""), params.pop("password", "")
    host, port = params.pop("host", ""), params.pop("port", "")
    dbname = params.pop("dbname", "")
    if host.startswith("/") or "," in host:  # a socket directory, or several hosts
        params["host"], host = host, ""
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    netloc = (auth + "@" if auth else "") + host + (":" + port if port and host else "")
    if port and not host:
        params["port"] = port
    query = "?" + urlencode(params) if params else ""
    return f"postgresql://{netloc}/{quote(dbname, safe='')}{query}"


def redact_keyword_dsn(dsn: str) -> str:
    """A keyword DSN with its password replaced by ``***``."""
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", dsn)


def sqlalchemy_url(dsn: str) -> str:
    """A ``postgresql://`` DSN as a SQLAlchemy URL on the psycopg (3) driver."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    scheme = dsn.split("://", 1)[0] if "://" in dsn else ""
    if scheme.split("+", 1)[0] not in ("postgresql", "postgres"):
        raise ConfigurationError(
            f"invalid DSN {redact(dsn)!r}: expected a URL like "
            "postgresql://user:password@host:5432/dbname"
        )
    try:
        url = make_url("postgresql" + dsn[len(scheme) :])
    except (ArgumentError, ValueError) as exc:
        raise ConfigurationError(f"invalid DSN {redact(dsn)!r}: {exc}") from exc
    return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def redact(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***`` (for messages)."""
    return redact_url(dsn)


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong, driver noise removed."""
    inner: BaseException = getattr(exc, "orig", None) or exc
    text = str(inner).strip() or type(inner).__name__
    first = text.splitlines()[0].strip()
    # SQLAlchemy appends "(Background on this error at: ...)"; libpq prefixes the address.
    first = first.split("(Background on this error", 1)[0].strip()
    kind = type(inner).__name__
    return f"{kind}: {first}" if kind not in first else first


def connection_env(args: argparse.Namespace) -> dict[str, str]:
    """``os.environ`` with ``--dsn`` and ``--schema`` applied, for ``bootstrap_from_env``."""
    env = dict(os.environ)
    if getattr(args, "dsn", None):
        env["LANE_PG_DSN"] = args.dsn
    schema = getattr(args, "schema", None)
    if schema:
        env["LANE_PG_SCHEMA"] = schema
    return env


def resolve_connection(
    name: str | None,
    *,
    env: Mapping[str, str] | None = None,
    facade: QueueFacade | None = None,
    for_worker: bool = False,
) -> tuple[QueueFacade, str, Connection]:
    """The connection ``--connection NAME`` names: ``(facade, resolved name, driver)``.

    Wires ``facade`` (``lane_pg.Q`` unless given) from ``env`` (``os.environ``) with
    ``bootstrap_from_env`` unless it has a default connection already (an ``--app`` module
    that configured it), then looks ``name`` up among its connections; ``None`` or ``""``
    is the default connection. Nothing is opened: a durable driver connects on first use,
    so an unknown name, like a bad environment, is a ``ConfigurationError`` (exit 2)
    before any I/O. ``for_worker`` refuses the memory
    fallback of an unknown ``LANE_PG_DRIVER`` (a worker never silently runs on memory).
    A command that needs the backend under a ``BackendDriver`` awaits ``driver.backend()``.
    """
    from lane_pg.facade import Q, bootstrap_from_env

    configured = facade or Q
    try:
        configured.driver()  # an --app module may have configured it already: keep that
    except ConfigurationError:
        bootstrap_from_env(configured, env, for_worker=for_worker)
    resolved = name or configured.connection_name()
    try:
        driver = configured.connection(resolved)
    except ConfigurationError as exc:
        # A configuration error (exit 2, as for any bad usage), before any I/O.
        raise ConfigurationError(f"--connection {resolved!r}: {exc}") from exc
    return configured, resolved, driver


def store_note() -> str:
    """`` (the embedded PostgreSQL in /abs/.lane_pg)`` when this process uses the embedded
    server (no DSN was given), else nothing: for a command's start-up line."""
    embedded = sys.modules.get("lane_pg.postgres.embedded")
    directories = embedded.embedded_dirs() if embedded is not None else []
    if not directories:
        return ""
    return f" (the embedded PostgreSQL in {', '.join(str(d) for d in directories)})"


async def warn_if_new_queue(backend: JobQueueBackend, queue: str, what: str) -> None:
    """Warn on stderr when ``queue`` has never had a job or a setting (no queue row yet:
    every push, pause, limit and retention creates one), so a typo is seen; ``what`` says
    what the command does anyway (``paused ahead of time``). Read before the command acts:
    a first push racing with it only changes whether this warning shows."""
    if queue not in await backend.queues.list_queues():
        print(
            f"lane_pg: queue {queue!r} has no jobs and no workers yet: {what}; check the name",
            file=sys.stderr,
            flush=True,
        )
