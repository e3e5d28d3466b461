"""``python -m lane_pg worker``: run a worker for an app's processors.

    python -m lane_pg worker --app myapp.jobs:app --queue control:1:3 --queue prompt:5:2

``--queue NAME[:PRIORITY[:CONCURRENCY]]`` may repeat; lanes are served in priority order
(0 first). Without ``--queue`` the app's lanes are used, and without those every queue.
SIGTERM or SIGINT stops claiming at once, lets running jobs finish for up to
``--shutdown-timeout`` seconds, releases the rest back to their queue, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import sys

from lane_pg.app import App
from lane_pg.cli.common import DEFAULT_SCHEMA, CommandError, add_connection_arguments
from lane_pg.cli.limits import parse_rate
from lane_pg.errors import LaneError
from lane_pg.types import Lane
from lane_pg.worker import WorkerConfig

HELP = "run a worker: claim jobs of the given queues and run the app's processors"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app",
        required=True,
        help="MODULE[:ATTR]: the module registering job classes, and its lane_pg.App",
    )
    parser.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME[:PRIORITY[:CONCURRENCY]]",
        help="a lane to serve (repeatable); default: the app's lanes, else every queue",
    )
    shipped = WorkerConfig.__dataclass_fields__  # the defaults live once, in WorkerConfig
    concurrency, lease = shipped["concurrency"].default, shipped["lease"].default
    shutdown, poll = shipped["shutdown_timeout"].default, shipped["poll_interval"].default
    parser.add_argument(
        "--concurrency", type=int, default=concurrency, help=f"jobs run at once ({concurrency})"
    )
    parser.add_argument(
        "--burst", action="store_true", help="exit 0 once nothing is ready and nothing runs"
    )
    parser.add_argument("--lease", type=float, default=lease, help=f"lease seconds ({lease:g})")
    parser.add_argument(
        "--shutdown-timeout", type=float, default=shutdown, help="seconds to finish jobs on stop"
    )
    parser.add_argument(
        "--poll-interval", type=float, default=poll, help=f"slow poll behind NOTIFY ({poll:g} s)"
    )
    parser.add_argument("--worker-id", default=None, help="default: host-pid-random")
    parser.add_argument(
        "--claim-rate",
        default=None,
        metavar="N/DURATION",
        help="this worker's claim rate limit, counted over every worker of each queue and"
        " preferred to the queue's own (e.g. 100/1s, 5/500ms)",
    )
    limit = shipped["stacktrace_limit"].default
    parser.add_argument(
        "--stacktrace-limit",
        type=int,
        default=limit,
        metavar="N",
        help=f"tracebacks kept per job, newest last; 0 stores none ({limit})",
    )
    parser.add_argument(
        "--fail-on-timeout",
        action="store_true",
        help="a job that exceeds its timeout fails for good (TimeoutExceeded) instead of"
        " being retried",
    )
    add_connection_arguments(parser)


def parse_lane(text: str) -> Lane:
    """``NAME[:PRIORITY[:CONCURRENCY]]`` as a Lane."""
    name, *rest = text.split(":")
    if len(rest) > 2:
        raise CommandError(f"--queue {text!r}: expected NAME[:PRIORITY[:CONCURRENCY]]")
    try:
        priority = int(rest[0]) if rest and rest[0] else 0
        concurrency = int(rest[1]) if len(rest) > 1 and rest[1] else None
        return Lane(name, priority, concurrency)
    except ValueError as exc:
        raise CommandError(f"--queue {text!r}: {exc}") from exc


def load_app(spec: str) -> App:
    """The app of ``--app MODULE[:ATTR]``. Importing the module registers its job classes
    (``lane_pg.register_job``); without ``:ATTR`` its one ``App``, if it has one, brings
    the processor functions, else a plain ``App()`` runs the job classes alone."""
    module_name, colon, attr = spec.partition(":")
    if not module_name or (colon and not attr):
        raise CommandError(f"--app {spec!r}: expected MODULE or MODULE:ATTR, e.g. myapp.jobs:app")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandError(f"--app {spec!r}: cannot import {module_name!r}: {exc}") from exc
    if not attr:
        apps = {id(value): value for value in vars(module).values() if isinstance(value, App)}
        if len(apps) > 1:
            raise CommandError(
                f"--app {spec!r}: the module has several Apps; name one as MODULE:ATTR"
            )
        return next(iter(apps.values())) if apps else App()
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise CommandError(f"--app {spec!r}: {attr!r} is not a lane_pg.App")
    return app


def run(args: argparse.Namespace) -> int:
    sys.path.insert(0, "")  # MODULE is looked up from the current directory, like python -m
    app = load_app(args.app)
    # --schema (or $LANE_PG_SCHEMA) overrides the app's schema unless left at the default.
    schema = app.schema if args.schema == DEFAULT_SCHEMA else args.schema
    if args.dsn or schema != app.schema:
        app = _with_dsn(app, args.dsn or app.resolve_dsn(), schema)
    lanes = tuple(parse_lane(text) for text in args.queue) or app.lanes
    settings: dict[str, object] = {
        "concurrency": args.concurrency,
        "lanes": lanes,
        "lease": args.lease,
        "shutdown_timeout": args.shutdown_timeout,
        "poll_interval": args.poll_interval,
        "burst": args.burst,
        "stacktrace_limit": args.stacktrace_limit,
        "fail_on_timeout": args.fail_on_timeout,
    }
    if args.worker_id:
        settings["worker_id"] = args.worker_id
    if args.claim_rate is not None:
        settings["claim_rate_limit"] = parse_rate(args.claim_rate, "--claim-rate")
    try:
        config = WorkerConfig(**settings)  # type: ignore[arg-type]
    except LaneError as exc:
        raise CommandError(str(exc)) from exc
    return asyncio.run(_serve(app, config))


def _with_dsn(app: App, dsn: str, schema: str) -> App:
    """The same processors and lanes on the DSN and schema given on the command line."""
    replacement = App(dsn, schema=schema, lanes=app.lanes, jobs=app.jobs, connection=app.connection)
    for name, processor in app.processors.items():
        replacement.processor(name)(processor)
    return replacement


async def _serve(app: App, config: WorkerConfig) -> int:
    worker = await app.create_worker(config)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, worker.stop)
    queues = ", ".join(
        f"{lane.name}(priority {lane.priority}, max {lane.max_concurrency or config.concurrency})"
        for lane in worker.lanes
    )
    print(
        f"lane_pg: worker {config.worker_id} started: queues {queues or 'all'};"
        f" concurrency {config.concurrency}; lease {config.lease:g}s",
        flush=True,
    )
    try:
        await worker.run()
    finally:
        if worker.notifier is not None:
            await worker.notifier.close()
        await app.close()
    logging.getLogger("lane_pg.worker").info(
        "worker %s exited: %s", config.worker_id, worker.counts
    )
    print(f"lane_pg: worker {config.worker_id} stopped: {worker.counts}", flush=True)
    return 0
