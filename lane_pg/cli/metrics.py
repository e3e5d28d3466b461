"""``python -m lane_pg metrics [--port 9464] [--host 127.0.0.1]``: a standalone Prometheus
exporter of the queues (needs ``lane_pg[prometheus]``).

At each scrape it reads every queue's six state counts, its pause flag and its live
workers (``lane_pg_queue_jobs``, ``lane_pg_queue_paused``, ``lane_pg_queue_workers``: the
gauges ``worker --metrics-port`` also serves), so one exporter covers a database whatever
runs its workers. It runs until SIGINT or SIGTERM.

With ``$PROMETHEUS_MULTIPROC_DIR`` set (prometheus_client's multiprocess mode: the worker
processes of a host, started with the same variable and each its own ``--metrics-port``,
keep their counters and histograms in files there), it also serves those counters and
histograms, summed over the processes per label set: one scrape for the host's workers.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from lane_pg.cli.common import CommandError, add_connection_arguments
from lane_pg.cli.pause import open_backend

HELP = "serve Prometheus gauges of every queue (counts by state, paused, live workers)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=9464,
        metavar="PORT",
        help="the port of http://HOST:PORT/metrics (default: 9464; 0: a free port, printed)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address to listen on (default: 127.0.0.1; 0.0.0.0 for every interface)",
    )
    add_connection_arguments(parser)


async def serve(args: argparse.Namespace) -> None:
    from lane_pg.worker.prometheus import add_multiprocess, new_registry, serve_metrics

    try:
        registry = new_registry()  # the extra's import: a one-line error without it
        shared = add_multiprocess(registry)
    except (ImportError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    if not 0 <= args.port < 65536:
        raise CommandError(f"--port {args.port}: expected a port, 0 to 65535")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with open_backend(args.dsn, args.schema) as backend:
        try:
            server, _ = serve_metrics(args.host, args.port, backend, registry)
        except OSError as exc:
            raise CommandError(f"--port {args.port}: cannot listen ({exc})") from None
        print(f"lane_pg: metrics at http://{args.host}:{server.server_port}/metrics", flush=True)
        if shared is not None:
            print(f"lane_pg: with the worker counters and histograms of {shared}", flush=True)
        try:
            await stop.wait()
        finally:
            server.shutdown()
            server.server_close()


def run(args: argparse.Namespace) -> int:
    asyncio.run(serve(args))
    return 0
