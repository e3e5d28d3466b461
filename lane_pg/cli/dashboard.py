"""``python -m lane_pg dashboard [--port 8080] [--host 127.0.0.1] [--read-only]
[--hide-data]``: serve the web dashboard (needs ``lane_pg[web]``).

It binds 127.0.0.1 unless ``--host`` says otherwise. Viewers are decided by the
environment (``lane_pg.dashboard.access``): ``LANE_PG_DASHBOARD_AUTH=user:password``
grants every action, ``LANE_PG_DASHBOARD_READONLY_AUTH=user:password`` a read-only view;
with neither, every request may act, and ``--read-only`` makes every viewer read-only.
``--hide-data`` shows no job data, result or progress (payloads holding secrets). The
address is printed once the server listens (``--port 0`` picks a free port). Runs until
SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
from types import FrameType
from typing import TYPE_CHECKING

from lane_pg.cli.common import CommandError, add_connection_arguments
from lane_pg.cli.pause import open_backend

if TYPE_CHECKING:
    import uvicorn

    from lane_pg.dashboard.live import LiveHub

HELP = "serve the web dashboard: queues, jobs, failures, batches, schedules, live counts"

POOL_SIZE = 4
"""Connections the dashboard's pages share (the live updates' LISTEN has its own)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=8080,
        metavar="PORT",
        help="the port of http://HOST:PORT/ (default: 8080; 0: a free port, printed)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address to listen on (default: 127.0.0.1, this machine only)",
    )
    parser.add_argument(
        "--read-only", action="store_true", help="every viewer may look, none may act"
    )
    parser.add_argument(
        "--hide-data",
        action="store_true",
        help="show no job data, result or progress, and allow no search into data",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="seconds between two reads of the counts for open pages, between wake-ups"
        " (default: 2 seconds)",
    )
    add_connection_arguments(parser)


async def serve(args: argparse.Namespace) -> None:
    try:
        import uvicorn

        from lane_pg.dashboard import create_app, environment_access, read_only_access
    except ImportError as exc:
        raise CommandError(
            f"the dashboard needs its extra: pip install 'lane_pg[web]' ({exc})"
        ) from None
    if not 0 <= args.port < 65536:
        raise CommandError(f"--port {args.port}: expected a port, 0 to 65535")
    if not 0 < args.poll_interval <= 60:
        raise CommandError(f"--poll-interval {args.poll_interval}: expected (0, 60] seconds")
    try:
        access = environment_access()
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if args.read_only:
        access = read_only_access(access)

    async with open_backend(args.dsn, args.schema, max_size=POOL_SIZE) as backend:
        app = create_app(
            backend, access=access, hide_data=args.hide_data, poll_interval=args.poll_interval
        )
        config = uvicorn.Config(
            app, host=args.host, port=args.port, log_level="warning", lifespan="on"
        )
        server = _stopping_server(config, app.state.dashboard.live)
        task = asyncio.create_task(server.serve())
        while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn sets a flag)
            await asyncio.sleep(0.05)
        if task.done():
            await task
            raise CommandError(f"cannot listen on {args.host}:{args.port}")
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"lane_pg: dashboard at http://{args.host}:{port}/", flush=True)
        await task


def _stopping_server(config: uvicorn.Config, hub: LiveHub) -> uvicorn.Server:
    """uvicorn's server that, told to stop, also ends the pages' live streams: it waits
    for every open response before it exits, and those never end by themselves."""
    import uvicorn

    loop = asyncio.get_running_loop()

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            # A signal handler: run it on the loop, not between two of its bytecodes.
            loop.call_soon_threadsafe(hub.end_streams)

    return Server(config)


def run(args: argparse.Namespace) -> int:
    asyncio.run(serve(args))
    return 0
