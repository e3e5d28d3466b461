"""``python -m lane_pg worker`` (alias ``work``): run a worker for an app's processors.

    python -m lane_pg worker --app myapp.jobs:app --queue control:1:3 --queue prompt:5:2
    python -m lane_pg work --app myapp.jobs --connection reports --queue exports,heavy
    python -m lane_pg worker --app myapp.jobs                  # the queues the app declares
    python -m lane_pg worker --app myapp.jobs --all-queues     # every queue of the database

``--queue NAME[:PRIORITY[:CONCURRENCY]]`` may repeat and takes comma lists; lanes are
served in priority order (0 first). Without ``--queue`` the worker serves the queues the
app declares: its lanes (``App(lanes=...)``) and the queue of each registered job class
(``lane_pg.facade.serving``); when those name none it refuses to start, saying how to name
them. ``--all-queues`` serves every queue of the database (an explicit choice: such a
worker claims every app's jobs). A queue forwarded by the facade (``Q.forward(src, dst)``)
is served with its destination, under the source's pause (ROUTE-5, PAUSE-8).
``--connection NAME`` drains a facade connection (CLI-2): an unknown name exits 2 before
anything is claimed. A failover connection gets one worker per connection of its list in
this process (``lane_pg.facade.failover_worker``); one that cannot filter by queue under
named queues exits 2, naming it, before anything is claimed (FOV-8). ``--max-jobs N`` exits
0 once N claimed jobs are settled (CLI-5); a ``restart`` command makes a running worker
exit 0 the same way (CLI-6).

Start-up: a database that cannot be reached yet (refused, timed out, a host name not
resolving yet, starting up, too many connections) is retried, 0.5 s doubling to 10 s, with
one warning per 30 s of waiting, for ``--startup-timeout`` seconds (default: until it
answers); SIGTERM or SIGINT ends the wait. What waiting cannot fix (authentication, a
database that does not exist, a malformed DSN, a missing or older schema) exits 1 at once;
only a server that was unreachable and then answers without the lane schema (or the
database) gets 60 s more, for a migrate running beside the worker.

Shutdown: the first SIGTERM or SIGINT stops claiming, prints what the worker waits for, lets
running jobs finish for up to ``--shutdown-timeout`` seconds, releases the rest back to
their queue, and exits 0 (CLI-4). A second one stops at once: the running jobs are given
back to waiting (leases cleared, their attempt not counted) and the worker exits 128 + the
signal's number (130 for SIGINT, 143 for SIGTERM). Pause transitions of the queues it
serves (with ``--all-queues``: of every queue, and ``All queues`` for the connection-wide
pause) are printed as ``YYYY-MM-DD HH:MM:SS Queue billing PAUSED`` (PAUSE-7, CLI-13).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import math
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.url import redact_url
from lane_pg.cli.common import (
    DEFAULT_SCHEMA,
    CommandError,
    add_connection_arguments,
    add_connection_name_argument,
    connection_env,
    describe_error,
    duration_option,
    resolve_connection,
    store_note,
)
from lane_pg.cli.limits import parse_rate
from lane_pg.errors import ConfigurationError, LaneError
from lane_pg.facade import (
    BackendDriver,
    Events,
    FacadeWorkerHooks,
    FailoverDriver,
    FailoverWorker,
    Q,
)
from lane_pg.facade.app import App
from lane_pg.facade.serving import NO_QUEUES, with_forwards
from lane_pg.facade.workers import start_failover_worker
from lane_pg.types import Lane
from lane_pg.worker import Worker, WorkerConfig, joblog
from lane_pg.worker.config import UNKNOWN_JOB_CHOICES
from lane_pg.worker.logs import configure_cli_logging
from lane_pg.worker.pausing import WorkerHooks
from lane_pg.worker.start import DatabaseUnreachable, close_worker, open_when_reachable

T = TypeVar("T")

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
    queues = parser.add_mutually_exclusive_group()
    queues.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME[:PRIORITY[:CONCURRENCY]][,...]",
        help="lanes to serve (repeatable, comma-separated); default: the app's lanes and"
        " its job classes' queues (refused when those name none)",
    )
    queues.add_argument(
        "--all-queues",
        action="store_true",
        help="serve every queue of the database, whichever app its jobs belong to",
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
        help=f"time running jobs get to finish after SIGTERM/SIGINT (30s, 2m; a bare number"
        f" is seconds; default: {shutdown:g}s); a second signal gives them back at once",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (needs lane_pg[prometheus];"
        " 0: a free port, printed at start; default: off)",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address --metrics-port listens on (default: 127.0.0.1; 0.0.0.0 for every"
        " interface)",
    )
    parser.add_argument(
        "--startup-timeout",
        type=duration_option("s"),
        default=None,
        metavar="DURATION",
        help="how long to keep retrying a database that cannot be reached yet (30s, 5m; a"
        " bare number is seconds; 0: try once; default: until it answers)",
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
    """Every ``--queue`` value, each a comma list of ``NAME[:PRIORITY[:CONCURRENCY]]``. An
    empty element (a trailing comma) is skipped; a value that names no queue at all (an
    unset ``$QUEUES``) is refused."""
    lanes: list[Lane] = []
    for text in texts:
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if not parts:
            raise CommandError(
                f"--queue {text!r} names no queue: give NAME[:PRIORITY[:CONCURRENCY]]"
                " (repeatable), or --all-queues to serve every queue"
            )
        lanes.extend(parse_lane(part) for part in parts)
    return tuple(lanes)


def parse_lane(text: str) -> Lane:
    """``NAME[:PRIORITY[:CONCURRENCY]]`` as a Lane; a ``CommandError`` sentence otherwise."""
    name, *rest = text.split(":")
    if len(rest) > 2:
        raise CommandError(f"--queue {text!r}: expected NAME[:PRIORITY[:CONCURRENCY]]")
    if not name:
        raise CommandError(f"--queue {text!r}: the queue name is empty")
    priority = _whole(text, "the priority", rest[0], least=0) if rest and rest[0] else 0
    concurrency = (
        _whole(text, "the concurrency", rest[1], least=1) if len(rest) > 1 and rest[1] else None
    )
    try:
        return Lane(name, priority, concurrency)
    except LaneError as exc:
        raise CommandError(f"--queue {text!r}: {exc}") from exc


def _whole(text: str, what: str, value: str, *, least: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise CommandError(f"--queue {text!r}: {what} must be an integer, got {value!r}") from None
    if number < least:
        raise CommandError(f"--queue {text!r}: {what} must be >= {least}, got {value!r}")
    return number


def served_lanes(args: argparse.Namespace, app: App, connection: str) -> tuple[Lane, ...]:
    """The lanes the options and the app name: ``--queue``'s, else the app's lanes and job
    class queues, each with its forward destinations; () for ``--all-queues``. A
    ``CommandError`` saying how to name them when nothing does."""
    if args.all_queues:
        return ()
    given = parse_lanes(args.queue)
    if given:
        return with_forwards(given, Q, connection)
    lanes = app.served_lanes(Q, connection=connection)
    if not lanes:
        raise CommandError(NO_QUEUES)
    return lanes


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
    _check_options(args)  # a bad number is named before the app is even imported
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
    # Before anything is opened: a worker that would serve no named queue is refused here.
    config = worker_config(args, served_lanes(args, app, label))
    lifecycle = Lifecycle(config, args.startup_timeout)
    metrics = _metrics_endpoint(args)
    if metrics is not None and connection is not None and isinstance(connection[1], FailoverDriver):
        raise CommandError("--metrics-port is not available for a failover connection yet")
    if connection is not None and isinstance(connection[1], FailoverDriver):
        # FOV-8 and the list's other checks come first: nothing is opened if they fail.
        workers = _failover_workers(app, config, connection[1])
        return asyncio.run(_exiting(_serve_failover(workers, connection[0], lifecycle), lifecycle))
    if connection is not None:
        assert isinstance(connection[1], BackendDriver)
        serving = _serve_connection(app, config, connection[0], connection[1], lifecycle, metrics)
        return asyncio.run(_exiting(serving, lifecycle))
    return asyncio.run(_exiting(_serve(app, config, lifecycle, metrics), lifecycle))


class MetricsEndpoint:
    """``--metrics-port``: the registry of this worker's outcomes, and once its backend is
    open, the HTTP endpoint that also reads the queues at each scrape."""

    def __init__(self, host: str, port: int) -> None:
        from lane_pg.worker.prometheus import WorkerMetrics, new_registry

        self.host, self.port = host, port
        self.registry = new_registry()
        self.metrics = WorkerMetrics(self.registry)
        self.server: Any = None

    def hooks(self, inner: WorkerHooks) -> WorkerHooks:
        from lane_pg.worker.prometheus import MetricsHooks

        return MetricsHooks(inner, self.metrics)

    def start(self, backend: JobQueueBackend) -> None:
        from lane_pg.worker.prometheus import serve_metrics

        try:
            self.server, _ = serve_metrics(self.host, self.port, backend, self.registry)
        except OSError as exc:
            raise CommandError(f"--metrics-port {self.port}: cannot listen ({exc})") from None
        port = self.server.server_port
        print(f"lane_pg: metrics at http://{self.host}:{port}/metrics", flush=True)

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _metrics_endpoint(args: argparse.Namespace) -> MetricsEndpoint | None:
    if args.metrics_port is None:
        return None
    if not 0 <= args.metrics_port < 65536:
        raise CommandError(f"--metrics-port {args.metrics_port}: expected a port, 0 to 65535")
    try:
        return MetricsEndpoint(args.metrics_host, args.metrics_port)
    except ImportError as exc:
        raise CommandError(str(exc)) from None


async def _exiting(serving: Awaitable[int], lifecycle: Lifecycle) -> int:
    """``serving``'s exit code; after a forced stop the process ends here, its cleanup
    done: a thread still running a handler (whose job was given back) would otherwise
    hold the exit, since ``asyncio.run`` and the interpreter join threads first."""
    code = await serving
    if lifecycle.forced_by is not None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _check_options(args: argparse.Namespace) -> None:
    """Each numeric option in its range, the option named in the one-line error."""
    checks: list[tuple[str, float | None, bool, str]] = [
        ("--concurrency", args.concurrency, args.concurrency >= 1, "a whole number >= 1"),
        ("--lease", args.lease, _positive(args.lease), "a positive number of seconds"),
        (
            "--shutdown-timeout",
            args.shutdown_timeout,
            _positive(args.shutdown_timeout, zero=True),
            "a number of seconds >= 0",
        ),
        (
            "--poll-interval",
            args.poll_interval,
            args.poll_interval is None or _positive(args.poll_interval),
            "a positive number of milliseconds (the poll interval must be positive)",
        ),
        (
            "--block-timeout",
            args.block_timeout,
            args.block_timeout is None or _positive(args.block_timeout),
            "a positive number of seconds (the poll interval must be positive)",
        ),
        (
            "--max-jobs",
            args.max_jobs,
            args.max_jobs is None or args.max_jobs >= 1,
            "a whole number >= 1",
        ),
        (
            "--stacktrace-limit",
            args.stacktrace_limit,
            args.stacktrace_limit >= 0,
            "a whole number >= 0",
        ),
        (
            "--startup-timeout",
            getattr(args, "startup_timeout", None),
            getattr(args, "startup_timeout", None) is None
            or _positive(args.startup_timeout, zero=True),
            "a number of seconds >= 0",
        ),
    ]
    for option, value, ok, requirement in checks:
        if not ok:
            raise CommandError(f"{option} {value:g}: must be {requirement}")


def _positive(value: float, *, zero: bool = False) -> bool:
    """``value`` is finite and > 0 (>= 0 with ``zero``); NaN is neither."""
    return math.isfinite(value) and (value >= 0 if zero else value > 0)


def worker_config(args: argparse.Namespace, lanes: tuple[Lane, ...]) -> WorkerConfig:
    """The ``WorkerConfig`` the options give, for ``lanes`` (none: ``--all-queues``); a bad
    value is a one-line ``CommandError`` naming its option."""
    _check_options(args)
    poll = args.block_timeout
    if args.poll_interval is not None:
        poll = args.poll_interval / 1000  # CLI-1: milliseconds
    settings: dict[str, object] = {
        "concurrency": args.concurrency,
        "lanes": lanes,
        "all_queues": bool(getattr(args, "all_queues", False)) and not lanes,
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


class Lifecycle:
    """SIGTERM/SIGINT for the whole life of the process, and the start-up wait.

    Installed before the database is opened, so a signal ends the wait for it
    (``open``). Once the worker runs (``attach``), the first signal stops its claims and
    prints what it waits for; the second stops it at once (``Worker.stop(force=True)``),
    and ``exit_code`` is then 128 + that signal's number."""

    def __init__(self, config: WorkerConfig, startup_timeout: float | None) -> None:
        self.config = config
        self.startup_timeout = startup_timeout
        self.signals = 0
        self.forced_by: int | None = None
        self._last_signal: int | None = None
        self._requested: asyncio.Event | None = None
        self._worker: Worker | FailoverWorker | None = None

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        self._requested = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._received, signum)

    async def open(self, opener: Callable[[], Awaitable[T]], what: str) -> T | None:
        """``opener()`` once the database answers (``open_when_reachable``); None when a
        signal came first. What waiting cannot fix is a one-line ``CommandError``."""
        try:
            return await open_when_reachable(
                opener, what, timeout=self.startup_timeout, stop=self._requested
            )
        except (CommandError, ConfigurationError):
            raise
        except DatabaseUnreachable as exc:
            raise CommandError(str(exc)) from exc
        except Exception as exc:
            raise CommandError(
                f"cannot use {what}: {describe_error(exc)} (not retried: waiting cannot fix it)"
            ) from exc

    def attach(self, worker: Worker | FailoverWorker) -> None:
        """The worker the signals stop from now on (told at once of signals seen already)."""
        self._worker = worker
        if self.signals >= 2:
            self.forced_by = self._last_signal
            worker.stop(force=True)
        elif self.signals == 1:
            worker.stop()

    def stopped_while_waiting(self) -> int:
        print(
            f"lane_pg: worker {self.config.worker_id} stopped while waiting for the database",
            flush=True,
        )
        return 0

    def exit_code(self) -> int:
        """0, or 128 + the signal that forced the stop (as a shell reports a signal)."""
        return 0 if self.forced_by is None else 128 + self.forced_by

    def _received(self, signum: int) -> None:
        self.signals += 1
        self._last_signal = signum
        if self._requested is not None:
            self._requested.set()
        worker = self._worker
        if worker is None:
            return
        worker_id = self.config.worker_id
        if self.signals == 1:
            running = worker.running
            waits = (
                f"waiting up to {self.config.shutdown_timeout:g}s for {_jobs(running)}; signal"
                " again to stop now"
                if running
                else "no job running"
            )
            print(f"lane_pg: worker {worker_id} stopping: {waits}", flush=True)
            worker.stop()
            return
        if self.forced_by is None:
            self.forced_by = signum
            print(
                f"lane_pg: worker {worker_id} stopping now: giving back {_jobs(worker.running)}",
                flush=True,
            )
        worker.stop(force=True)


def _jobs(count: int) -> str:
    return f"{count} running job" + ("" if count == 1 else "s")


async def _serve(
    app: App, config: WorkerConfig, lifecycle: Lifecycle, metrics: MetricsEndpoint | None = None
) -> int:
    lifecycle.install()
    try:
        what = f"the database {redact_url(app.resolve_dsn())}"
        backend = await lifecycle.open(app.backend, what)
        if backend is None:
            return lifecycle.stopped_while_waiting()
        hooks: WorkerHooks = CliWorkerHooks(Q.events, app.connection_label())
        if metrics is not None:
            hooks = metrics.hooks(hooks)
            metrics.start(backend)
        worker = await app.create_worker(config, hooks=hooks)
        try:
            return await _run(worker, config, app.connection_label(), lifecycle)
        finally:
            await close_worker(worker)
            if metrics is not None:
                metrics.stop()
    finally:
        await app.close()


async def _serve_connection(
    app: App,
    config: WorkerConfig,
    name: str,
    driver: BackendDriver,
    lifecycle: Lifecycle,
    metrics: MetricsEndpoint | None = None,
) -> int:
    """A worker on facade connection ``name`` (``--connection``): ``App.create_worker``'s,
    once the connection's database answers."""
    lifecycle.install()
    try:
        what = f"connection {name!r}" + (f" ({redact_url(driver.url)})" if driver.url else "")
        backend = await lifecycle.open(driver.backend, what)
        if backend is None:
            return lifecycle.stopped_while_waiting()
        endpoint = metrics
        if endpoint is not None:
            endpoint.start(backend)

        def hooks(label: str) -> WorkerHooks:
            inner = CliWorkerHooks(Q.events, label)
            return inner if endpoint is None else endpoint.hooks(inner)

        worker = await app.create_worker(config, connection=name, hooks=hooks)
        try:
            return await _run(worker, config, name, lifecycle)
        finally:
            if isinstance(worker, Worker):
                await close_worker(worker)
            if endpoint is not None:
                endpoint.stop()
    finally:
        await driver.close()


def _failover_workers(app: App, config: WorkerConfig, driver: FailoverDriver) -> FailoverWorker:
    """One worker per connection of the failover list, each labelled with its inner
    connection (FOV-5, FOV-6, FOV-8): ``App.create_worker``'s, made before the process
    waits for anything, so the list's checks come first."""
    return start_failover_worker(
        app.worker_spec(Q),
        driver,
        config,
        lambda label: CliWorkerHooks(Q.events, label, tagged=True),
    )


async def _serve_failover(workers: FailoverWorker, name: str, lifecycle: Lifecycle) -> int:
    """Each connection of the list is retried with backoff while it is down (``FailoverWorker``),
    without ``--startup-timeout``: the others are served meanwhile."""
    lifecycle.install()
    try:
        described = f"{name} (failover: {', '.join(workers.labels)}; concurrency per connection)"
        return await _run(workers, workers.config, described, lifecycle)
    finally:
        await workers.driver.close()


async def _run(
    worker: Worker | FailoverWorker, config: WorkerConfig, connection: str, lifecycle: Lifecycle
) -> int:
    lifecycle.attach(worker)
    queues = ", ".join(
        f"{lane.name}(priority {lane.priority}, max {lane.max_concurrency or config.concurrency}"
        + (f", paused as {lane.pause_as}" if lane.pause_as else "")
        + ")"
        for lane in worker.lanes
    )
    print(
        f"lane_pg: worker {config.worker_id} started: connection {connection}{store_note()};"
        f" queues {queues or 'all (--all-queues)'}; concurrency {config.concurrency};"
        f" lease {config.lease:g}s",
        flush=True,
    )
    await worker.run()
    if worker.forced:
        given = [f"{queue}/{job_id}" for queue, job_id in worker.given_back]
        listed = ", ".join(given[:10]) + (f" and {len(given) - 10} more" if len(given) > 10 else "")
        print(
            f"lane_pg: worker {config.worker_id} stopped at once: gave back {len(given)} running"
            " job"
            + ("" if len(given) == 1 else "s")
            + (f" ({listed})" if given else "")
            + (
                "; its attempt is not counted"
                if len(given) == 1
                else "; their attempts are not counted"
            ),
            flush=True,
        )
    done = joblog.summary(worker.counts)
    logging.getLogger("lane_pg.worker").info("worker %s exited: %s", config.worker_id, done)
    print(f"lane_pg: worker {config.worker_id} stopped: {done}", flush=True)
    return lifecycle.exit_code()
