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
import sys
from collections.abc import Sequence
from types import ModuleType

from lane_pg.cli.common import CommandError, describe_error
from lane_pg.errors import ConfigurationError

__all__ = ["COMMANDS", "CommandError", "build_parser", "console_main", "main"]

PROG = "python -m lane_pg"
COMMANDS: tuple[str, ...] = (
    "migrate",
    "worker",
    "stats",
    "pause",
    "resume",
    "retention",
    "events",
    "repeats",
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="lane_pg: a PostgreSQL job queue")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log progress (INFO) to stderr"
    )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=CommandParser
    )
    for name in COMMANDS:
        module = _command_module(name)
        command = sub.add_parser(
            name,
            aliases=getattr(module, "ALIASES", ()),
            help=module.HELP,
            description=module.HELP,
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.run(args)
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
