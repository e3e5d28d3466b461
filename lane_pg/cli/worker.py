"""``python -m lane_pg worker`` (alias ``work``): run a worker for an app's processors.

    python -m lane_pg worker --app myapp.jobs:app --queue control:1:3 --queue prompt:5:2
    python -m lane_pg work --app myapp.jobs --connection reports --queue exports,heavy

``--queue NAME[:PRIORITY[:CONCURRENCY]]`` may repeat and takes comma lists; lanes are
served in priority order (0 first). Without ``--queue`` the app's lanes are used, and
without those every queue. A queue forwarded by the facade (``Q.forward(src, dst)``) is
served with its destination, under the source's pause (ROUTE-5, PAUSE-8).
``--connection NAME`` drains a facade connection (CLI-2): an unknown name exits 2 before
anything is claimed. A failover connection gets one worker per connection of its list in
this process (``lane_pg.facade.failover_worker``); one that cannot filter by queue under
``--queue`` exits 2, naming it, before anything is claimed (FOV-8). ``--max-jobs N`` exits
0 once N claimed jobs are settled (CLI-5); a ``restart`` command makes a running worker
exit 0 the same way (CLI-6). SIGTERM or SIGINT stops claiming at once, lets running jobs
finish for up to ``--shutdown-timeout`` seconds, releases the rest back to their queue,
and exits 0 (CLI-4). Pause transitions of the
queues it was started with (without ``--queue``: of every queue, and ``All queues`` for
the connection-wide pause) are printed as ``YYYY-MM-DD HH:MM:SS Queue billing PAUSED``
(PAUSE-7, CLI-13).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import sys
from datetime import datetime

from lane_pg.app import App
from lane_pg.backend import JobQueueBackend
from lane_pg.cli.common import (
    DEFAULT_SCHEMA,
    CommandError,
    add_connection_arguments,
    add_connection_name_argument,
    connection_env,
    duration_option,
    resolve_connection,
    store_note,
)
from lane_pg.cli.limits import parse_rate
from lane_pg.errors import LaneError
from lane_pg.facade import (
    BackendDriver,
    Events,
    FacadeWorkerHooks,
    FailoverDriver,
    FailoverWorker,
    Q,
    QueueFacade,
)
from lane_pg.facade.failed import default_failed_store
from lane_pg.logs import configure_cli_logging
from lane_pg.types import Lane
from lane_pg.worker import Worker, WorkerConfig, joblog
from lane_pg.worker.budget import ClaimBudget
from lane_pg.worker.config import UNKNOWN_JOB_CHOICES
from lane_pg.worker.start import close_worker, create_worker

HELP = "run a worker: claim jobs of the given queues and run the app's processors"
ALIASES = ("work",)
CONFIGURES_LOGGING = True
"""Logging is configured once the app is imported (``configure_cli_logging``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app",
        default=None,
        help="MODULE[:ATTR]: the module registering job classes, listeners and"
        " connections, and its lane_pg.App (without it: nothing to run, refused)",
    )
    parser.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME[:PRIORITY[:CONCURRENCY]][,...]",
        help="lanes to serve (repeatable, comma-separated); default: the app's lanes, else"
        " every queue",
    )
    shipped = WorkerConfig.__dataclass_fields__  # the defaults live once, in WorkerConfig
    concurrency, lease = shipped["concurrency"].default, shipped["lease"].default
    shutdown, poll = shipped["shutdown_timeout"].default, shipped["poll_interval"].default
    poll_ms: float = poll * 1000  # type: ignore[operator]  # a float default, in seconds
    parser.add_argument(
        "--concurrency", type=int, default=concurrency, help=f"jobs run at once ({concurrency})"
    )
    parser.add_argument(
        "--sync-threads",
        type=int,
        default=None,
        metavar="N",
        help="threads running plain def handlers, at most N at once (default: the"
        " concurrency); a sync handler that outlives its job's timeout keeps its thread"
        " until it returns",
    )
    parser.add_argument(
        "--burst", action="store_true", help="exit 0 once nothing is ready and nothing runs"
    )
    parser.add_argument(
        "--lease",
        "--visibility-timeout",
        dest="lease",
        type=float,
        default=lease,
        help=f"lease (visibility timeout) seconds ({lease:g})",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=duration_option("s"),
        default=shutdown,
        metavar="DURATION",
        help=f"time to finish running jobs on stop: 30s, 2m; a bare number is seconds"
        f" (default: {shutdown:g}s)",
    )
    idle = parser.add_mutually_exclusive_group()
    idle.add_argument(
        "--poll-interval",
        type=duration_option("ms", "ms"),
        default=None,
        metavar="DURATION",
        help="time between claims of an idle worker, the slow poll behind NOTIFY: 500ms,"
        f" 5s; a bare number is milliseconds (default: {poll_ms:g}ms)",
    )
    idle.add_argument(
        "--block-timeout",
        type=duration_option("s"),
        default=None,
        metavar="DURATION",
        help="the same setting as --poll-interval, where a bare number is seconds"
        f" (default: {poll:g}s)",
    )
    parser.add_argument(
        "--max-jobs",
        type=int,
        default=None,
        metavar="N",
        help="exit 0 once N claimed jobs are settled, whatever their outcome",
    )
    parser.add_argument("--worker-id", default=None, help="default: host-pid-random")
    parser.add_argument(
        "--claim-rate",
        default=None,
        metavar="N/DURATION",
        help="this worker's claim rate limit, counted over every worker of each queue and"
        " preferred to the queue's own (e.g. 100/1s, 5/500ms; default: none, the queue's"
        " own applies)",
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
    parser.add_argument(
        "--on-unknown-job",
        choices=UNKNOWN_JOB_CHOICES,
        default=shipped["on_unknown_job"].default,
        help="a job whose name no processor here serves: fail it for good (UnknownJobName,"
        " the default) or release it, its attempt not spent and delayed by the poll"
        " interval, for a worker that knows the name (a fleet running two versions)",
    )
    add_connection_name_argument(parser)
    add_connection_arguments(parser)


def parse_lanes(texts: list[str]) -> tuple[Lane, ...]:
    """Every ``--queue`` value, each a comma list of ``NAME[:PRIORITY[:CONCURRENCY]]``."""
    return tuple(
        parse_lane(part.strip()) for text in texts for part in text.split(",") if part.strip()
    )


def with_forwards(
    lanes: tuple[Lane, ...], facade: QueueFacade, connection: str
) -> tuple[Lane, ...]:
    """``lanes`` plus a lane for each forward destination of theirs (ROUTE-5), with its
    source's priority and bound and paused as its source (PAUSE-8)."""
    names = [lane.name for lane in lanes]
    by_name = {lane.name: lane for lane in lanes}
    extra = []
    for source in names:
        target = facade.routing.forwarded(source, connection)
        if target not in by_name:
            lane = by_name[source]
            by_name[target] = Lane(
                target, lane.priority, lane.max_concurrency, lane.min_concurrency, pause_as=source
            )
            extra.append(by_name[target])
    return lanes + tuple(extra)


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
        if not hasattr(module, attr):
            raise CommandError(f"--app {spec!r}: module {module_name!r} has no {attr!r}")
        raise CommandError(f"--app {spec!r}: {attr!r} is a {type(app).__name__}, not a lane_pg.App")
    return app


def run(args: argparse.Namespace) -> int:
    sys.path.insert(0, "")  # MODULE is looked up from the current directory, like python -m
    app = load_app(args.app) if args.app else App()
    configure_cli_logging(args.verbose, args.log_format)
    connection = None
    if args.connection is not None:
        # After the app's import, which may configure connections (CLI-1); an unknown name
        # is refused here, before anything is opened or claimed (CLI-2).
        _, name, driver = resolve_connection(
            args.connection, env=connection_env(args), for_worker=True
        )
        if not isinstance(driver, BackendDriver | FailoverDriver):
            raise CommandError(f"connection {name!r} ({driver.driver_name}) has no worker")
        connection = (name, driver)
    else:
        # --schema (or $LANE_PG_SCHEMA) overrides the app's schema unless left at the default.
        schema = app.schema if args.schema == DEFAULT_SCHEMA else args.schema
        if args.dsn or schema != app.schema:
            app = _with_dsn(app, args.dsn or app.resolve_dsn(), schema)
    if not app.processors and (app.jobs is None or not list(app.jobs)):
        raise CommandError(
            "nothing to run: no processors and no job classes are registered; give"
            " --app MODULE[:ATTR] naming the module that registers them"
        )
    label = connection[0] if connection is not None else app.connection_label()
    config = worker_config(args, with_forwards(parse_lanes(args.queue) or app.lanes, Q, label))
    if connection is not None and isinstance(connection[1], FailoverDriver):
        # FOV-8 and the list's other checks come first: nothing is opened if they fail.
        workers = _failover_workers(app, config, connection[1])
        return asyncio.run(_serve_failover(workers, connection[0]))
    if connection is not None:
        assert isinstance(connection[1], BackendDriver)
        return asyncio.run(_serve_connection(app, config, connection[0], connection[1]))
    return asyncio.run(_serve(app, config))


def worker_config(args: argparse.Namespace, lanes: tuple[Lane, ...]) -> WorkerConfig:
    """The ``WorkerConfig`` the options give, for ``lanes``; a bad value is a one-line
    ``CommandError``."""
    poll = args.block_timeout
    if args.poll_interval is not None:
        poll = args.poll_interval / 1000  # CLI-1: milliseconds
    settings: dict[str, object] = {
        "concurrency": args.concurrency,
        "lanes": lanes,
        "lease": args.lease,
        "shutdown_timeout": args.shutdown_timeout,
        "burst": args.burst,
        "stacktrace_limit": args.stacktrace_limit,
        "fail_on_timeout": args.fail_on_timeout,
        "max_jobs": args.max_jobs,
        "on_unknown_job": args.on_unknown_job,
        "sync_threads": args.sync_threads,
    }
    if poll is not None:
        settings["poll_interval"] = poll
    if args.worker_id:
        settings["worker_id"] = args.worker_id
    if args.claim_rate is not None:
        settings["claim_rate_limit"] = parse_rate(args.claim_rate, "--claim-rate")
    try:
        return WorkerConfig(**settings)  # type: ignore[arg-type]
    except LaneError as exc:
        raise CommandError(str(exc)) from exc


def _with_dsn(app: App, dsn: str, schema: str) -> App:
    """The same processors and lanes on the DSN and schema given on the command line."""
    replacement = App(dsn, schema=schema, lanes=app.lanes, jobs=app.jobs, connection=app.connection)
    for name, processor in app.processors.items():
        replacement.processor(name)(processor)
    return replacement


class CliWorkerHooks(FacadeWorkerHooks):
    """The facade's worker events, and a status line for each (PAUSE-7, CLI-13); with
    ``tagged`` (a failover connection's workers, one per inner connection) each line ends
    with ``(on LABEL)``."""

    def __init__(self, events: Events, connection: str, *, tagged: bool = False) -> None:
        super().__init__(events, connection)
        self._tag = f" (on {connection})" if tagged else ""

    async def queue_paused(self, queue: str | None) -> None:
        self._status("All queues PAUSED" if queue is None else f"Queue {queue} PAUSED")
        await super().queue_paused(queue)

    async def queue_resumed(self, queue: str | None) -> None:
        self._status("All queues RESUMED" if queue is None else f"Queue {queue} RESUMED")
        await super().queue_resumed(queue)

    async def interrupted(self, processed: int) -> None:
        self._status(f"Restart signal: stopping after {processed} jobs")
        await super().interrupted(processed)

    def _status(self, text: str) -> None:
        print(f"{datetime.now().strftime('%Y-%m-%d %H:%M:%S')} {text}{self._tag}", flush=True)


async def _serve(app: App, config: WorkerConfig) -> int:
    worker = await app.create_worker(config, hooks=CliWorkerHooks(Q.events, app.connection_label()))
    try:
        return await _run(worker, config, app.connection_label())
    finally:
        await close_worker(worker)
        await app.close()


async def _serve_connection(
    app: App, config: WorkerConfig, name: str, driver: BackendDriver
) -> int:
    """A worker on facade connection ``name`` (``--connection``), made as ``App`` and
    ``run_worker`` make theirs (``lane_pg.worker.start.create_worker``)."""
    try:
        backend = await driver.backend()
        worker = await create_worker(
            backend,
            app.all_processors(Q, connection=name),
            config,
            failed_store=Q.failed_store() or default_failed_store(backend),
            connection=name,
            hooks=CliWorkerHooks(Q.events, name),
        )
        try:
            return await _run(worker, config, name)
        finally:
            await close_worker(worker)
    finally:
        await driver.close()


def _failover_workers(app: App, config: WorkerConfig, driver: FailoverDriver) -> FailoverWorker:
    """One worker per connection of the failover list, made as ``_serve_connection`` makes
    its own, each labelled with its inner connection (FOV-5, FOV-6, FOV-8)."""

    async def make(
        label: str, backend: JobQueueBackend, member: WorkerConfig, budget: ClaimBudget | None
    ) -> Worker:
        return await create_worker(
            backend,
            app.all_processors(Q, connection=label),
            member,
            failed_store=Q.failed_store() or default_failed_store(backend),
            connection=label,
            hooks=CliWorkerHooks(Q.events, label, tagged=True),
            claim_budget=budget,
        )

    return FailoverWorker(driver, config, make)


async def _serve_failover(workers: FailoverWorker, name: str) -> int:
    try:
        described = f"{name} (failover: {', '.join(workers.labels)}; concurrency per connection)"
        return await _run(workers, workers.config, described)
    finally:
        await workers.driver.close()


async def _run(worker: Worker | FailoverWorker, config: WorkerConfig, connection: str) -> int:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, worker.stop)
    queues = ", ".join(
        f"{lane.name}(priority {lane.priority}, max {lane.max_concurrency or config.concurrency}"
        + (f", paused as {lane.pause_as}" if lane.pause_as else "")
        + ")"
        for lane in worker.lanes
    )
    print(
        f"lane_pg: worker {config.worker_id} started: connection {connection}{store_note()};"
        f" queues {queues or 'all'}; concurrency {config.concurrency}; lease {config.lease:g}s",
        flush=True,
    )
    await worker.run()
    done = joblog.summary(worker.counts)
    logging.getLogger("lane_pg.worker").info("worker %s exited: %s", config.worker_id, done)
    print(f"lane_pg: worker {config.worker_id} stopped: {done}", flush=True)
    return 0
