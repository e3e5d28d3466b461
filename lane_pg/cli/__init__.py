"""Command line: ``python -m lane_pg <command> [options]``.

Each command is a module of this package listed in ``COMMANDS`` (a ``-`` in the command's
name is a ``_`` in the module's: ``recover-stalled`` is ``recover_stalled``) that defines
``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code), and
may define ``ALIASES`` (other names for it: ``work``, ``continue``). A command
reports an expected failure by raising ``CommandError`` or a ``LaneError``; ``main`` prints
it as one line on stderr and exits non-zero, never with a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from lane_pg.cli.common import CommandError, describe_error, keyword_dsn_to_url
from lane_pg.errors import ConfigurationError
from lane_pg.worker.logs import LOG_FORMATS, configure_cli_logging

__all__ = ["COMMANDS", "CommandError", "build_parser", "console_main", "main"]

PROG = "python -m lane_pg"
COMMANDS: tuple[str, ...] = (
    "migrate",
    "worker",
    "stats",
    "jobs",
    "job",
    "workers",
    "top",
    "metrics",
    "dashboard",
    "pause",
    "resume",
    "retention",
    "events",
    "repeats",
    "batches",
    "limits",
    "drain",
    "clean",
    "obliterate",
    "recover-stalled",
    "flow",
    "failed",
    "retry",
    "forget",
    "flush",
    "restart",
)

EXIT_ERROR = 1
EXIT_USAGE = 2


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(f"lane_pg.cli.{name.replace('-', '_')}")


class CommandParser(argparse.ArgumentParser):
    """A command's parser: an unknown option (``worker --queues x``) is refused with the
    command's own usage, not the top-level one argparse would print."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: every command's, or only command ``only``'s (its module imported,
    not every command's: 0.32 s -> 0.22 s a run of ``migrate`` or ``stats``)."""
    parser = argparse.ArgumentParser(prog=PROG, description="lane_pg: a PostgreSQL job queue")
    _add_logging_arguments(parser, None)
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=CommandParser
    )
    for name in COMMANDS if only is None else (only,):
        module = _command_module(name)
        command = sub.add_parser(
            name,
            aliases=getattr(module, "ALIASES", ()),
            help=module.HELP,
            description=module.HELP,
        )
        module.add_arguments(command)
        # Also after the command (``worker -v``); SUPPRESS keeps a value given before it.
        _add_logging_arguments(command, argparse.SUPPRESS)
        command.set_defaults(
            run=module.run, logging_after_import=getattr(module, "CONFIGURES_LOGGING", False)
        )
    return parser


def _announce_embedded(command: str) -> None:
    """The embedded server's notice (no DSN given) becomes the command's first line."""
    from lane_pg.postgres import embedded

    def announce(text: str) -> None:
        print(f"lane_pg {command}: {text}", file=sys.stderr, flush=True)

    embedded.announce = announce


def _read_keyword_dsns(args: argparse.Namespace) -> None:
    """``--dsn`` and ``$LANE_PG_DSN`` in libpq's keyword form (``host=db dbname=app``)
    become URLs, so every command and driver reads them."""
    if getattr(args, "dsn", None):
        args.dsn = keyword_dsn_to_url(args.dsn)
    from_env = os.environ.get("LANE_PG_DSN")
    if from_env:
        os.environ["LANE_PG_DSN"] = keyword_dsn_to_url(from_env)


def _stdout_closed() -> int:
    """The reader of our output went away (``stats | head -1``): exit quietly. Python
    would otherwise complain once more while flushing stdout at exit, so stdout is pointed
    at /dev/null first."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_ERROR


def _add_logging_arguments(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False if default is None else default,
        help="log progress (INFO) to stderr: for a worker, a line per job claimed and"
        " completed (with its duration)",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text" if default is None else default,
        help="log lines on stderr as text (default) or one JSON object per line (ts, level,"
        " logger, message, and the job's queue, job_id, name, attempt, max_attempts,"
        " error, next_run_at, duration_ms, traceback)",
    )


def _named_command(argv: Sequence[str] | None) -> str | None:
    """The command ``argv`` names by its own name (an alias or no command: None, and the
    whole parser decides), read past the options that may come before it."""
    before = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    _add_logging_arguments(before, None)
    try:
        _, rest = before.parse_known_args(argv)
    except argparse.ArgumentError:  # a bad option before the command: the whole parser says so
        return None
    return rest[0] if rest and rest[0] in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code."""
    args = build_parser(_named_command(argv)).parse_args(argv)
    if not args.logging_after_import:
        # The worker configures it itself, once its --app module is imported (an app's
        # own logging configuration wins: lane_pg.worker.logs.configure_cli_logging).
        configure_cli_logging(args.verbose, args.log_format)
    _announce_embedded(args.command)
    try:
        _read_keyword_dsns(args)
        code: int = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here rather than at exit
    except BrokenPipeError:
        return _stdout_closed()
    except (ConfigurationError, CommandError) as exc:
        print(f"lane_pg {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, ConfigurationError) else EXIT_ERROR
    except KeyboardInterrupt:
        print(f"lane_pg {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line, not a traceback
        if args.verbose:
            logging.getLogger("lane_pg.cli").exception("command failed")
        print(f"lane_pg {args.command}: error: {describe_error(exc)}", file=sys.stderr)
        return EXIT_ERROR
    return code


def console_main() -> None:
    """Entry point of ``python -m lane_pg`` and the ``lane-pg`` script."""
    sys.exit(main())
