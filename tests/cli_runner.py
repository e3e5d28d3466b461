"""``python -m lane_pg ARGS`` run in this process, through the CLI's entry function.

A new interpreter costs ~0.3 s of imports per call, and the CLI tests made hundreds of
them. ``run_lane_pg`` calls ``lane_pg.cli.main(argv)`` instead, as the process would, and
returns what a subprocess would have: the exit code and everything written to stdout and
stderr, as a ``subprocess.CompletedProcess``. What a fresh process would not share with
the test is set up around the call and put back afterwards:

- the environment is exactly ``env`` (the test's ``LANE_PG_*`` choices), and the working
  directory ``cwd``;
- stdin is empty and not a terminal (the ``stdin=DEVNULL`` of the subprocess tests);
- the root and ``lane_pg`` loggers start unconfigured (pytest's capture handlers set
  aside), so the CLI's own logging set-up writes to the captured stderr;
- the process-wide facade ``lane_pg.Q``, which the commands wire from the environment
  on first use, is reset before and after.

The call runs in a thread of its own: the commands ``asyncio.run`` their work, which an
async test's running loop would refuse. Calls are serialised (the state above is the
process's). The worker command stays a real process (``REAL_PROCESS_COMMANDS``): it
installs signal handlers, which only the main thread may, imports ``--app`` modules and
can end with ``os._exit``; so does whatever a test runs to check the process itself
(``tests/test_cli.py`` keeps the entry point's smoke tests).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL_PROCESS_COMMANDS = frozenset({"worker", "work", "metrics"})
_LOCK = threading.Lock()


def run_lane_pg(
    *args: str, env: Mapping[str, str], cwd: Path = REPO, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """What ``python -m lane_pg ARGS`` with environment ``env`` in ``cwd`` exits with and
    prints; in this process, except for ``REAL_PROCESS_COMMANDS``."""
    if args and args[0] in REAL_PROCESS_COMMANDS:
        return subprocess.run(
            [sys.executable, "-m", "lane_pg", *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    with _LOCK, ThreadPoolExecutor(max_workers=1, thread_name_prefix="lane_pg-cli") as pool:
        return pool.submit(_call, list(args), dict(env), cwd).result(timeout)


def _call(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    from lane_pg.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with _process_state(env, cwd, stdout, stderr):
        try:
            code = main(argv)
        except SystemExit as exited:  # argparse: --help, usage errors
            code = _exit_code(exited.code, stderr)
    return subprocess.CompletedProcess(
        ["python", "-m", "lane_pg", *argv], code, stdout.getvalue(), stderr.getvalue()
    )


def _exit_code(code: object, stderr: io.StringIO) -> int:
    """The status ``sys.exit(code)`` gives a process (a message is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=stderr)
    return 1


@contextlib.contextmanager
def _process_state(
    env: dict[str, str], cwd: Path, stdout: io.StringIO, stderr: io.StringIO
) -> Iterator[None]:
    from lane_pg.facade import Q

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_path = list(sys.path)
    loggers = [logging.getLogger(), logging.getLogger("lane_pg")]
    saved_logging = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    Q.reset()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(), stdout, stderr
    root, package = loggers
    root.handlers.clear()
    root.setLevel(logging.WARNING)
    package.handlers.clear()
    package.setLevel(logging.NOTSET)
    package.propagate = True
    try:
        yield
    finally:
        for logger, (handlers, level, propagate) in zip(loggers, saved_logging, strict=True):
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        Q.reset()
