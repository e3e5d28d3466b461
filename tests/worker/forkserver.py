"""Real worker processes without the interpreter start-up: a fork server.

``python -m lane_pg worker`` spent ~0.5 s of CPU importing lane_pg, asyncpg and psycopg
before it did anything, in every one of the hundred-odd worker processes of the suite.
The fork server is one process (per pytest process) that imports them once and then forks
a child per worker. Each child is a real process, as the tests need it to be (its own pid,
signals, SIGSTOP, SIGKILL, ``os._exit``, its stdout and stderr in files): it takes the
request's environment, working directory and output files, makes ``sys.argv`` and
``sys.path[0]`` what ``python -m lane_pg ARGS`` in that directory makes them, and runs the
same entry point (``lane_pg.cli.console_main``); the interpreter then ends as any does.

Only library modules are imported ahead: the test apps read the environment when they are
imported, so each child imports its ``--app`` itself. The server runs unbuffered (``-u``),
so a spawn that wants buffered output gets a plain ``python -m lane_pg`` instead
(tests/worker/conftest.py).

Protocol, one JSON object per line: the client writes ``{"argv", "env", "cwd", "stdout",
"stderr"}``; the server answers ``{"pid": N}`` at once and ``{"exited": N, "code": C}``
when that child ends (``C`` as ``subprocess.Popen.returncode``: ``-signal`` when killed).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

SERVER = Path(__file__).resolve()
PRELOAD = (
    "asyncpg",
    "psycopg",
    "lane_pg",
    "lane_pg.cli",
    "lane_pg.cli.worker",
    "lane_pg.postgres.backend",
    "lane_pg.worker",
)


# ------------------------------------------------------------------ the server process


def _serve() -> dict[str, Any] | None:
    """Fork a child per request; return the request in the child, None when stdin ends."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from lane_pg.cli import build_parser

    build_parser()  # imports every command's module

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pending = b""
    while True:
        ready, _, _ = select.select([0, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            _reap()
        if 0 not in ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            return None
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_r)
                os.close(wake_w)
                return dict(request)
            _answer({"pid": pid})


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _answer({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _answer(message: dict[str, Any]) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _become(request: dict[str, Any]) -> None:
    """In the child: the process ``python -m lane_pg ARGS`` would have been."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_APPEND)  # made by the client
        os.dup2(out, fd)
        os.close(out)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [str(Path(__import__("lane_pg").__file__).with_name("__main__.py"))]
    sys.argv += request["argv"]
    sys.path[0] = os.getcwd()  # what ``python -m`` puts first


# ------------------------------------------------------------------ the client


class ForkedProcess:
    """The part of ``subprocess.Popen`` the worker tests use, for a forked child."""

    def __init__(self, server: ForkServer, pid: int, args: list[str]) -> None:
        self._server = server
        self.pid = pid
        self.args = args

    @property
    def returncode(self) -> int | None:
        return self._server.exit_code(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._server.wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The client of one server process: ``spawn`` starts a child, a thread reads exits."""

    def __init__(self, env: dict[str, str]) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-u", str(SERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._requests: IO[bytes] = self._proc.stdin
        self._changed = threading.Condition()
        self._pids: list[int] = []
        self._exits: dict[int, int] = {}
        self._lock = threading.Lock()  # one request and its answer at a time
        self._reader = threading.Thread(
            target=self._read, args=(self._proc.stdout,), name="forkserver", daemon=True
        )
        self._reader.start()

    def _read(self, answers: IO[bytes]) -> None:
        for line in answers:
            message = json.loads(line)
            with self._changed:
                if "pid" in message:
                    self._pids.append(message["pid"])
                else:
                    self._exits[message["exited"]] = message["code"]
                self._changed.notify_all()

    def spawn(
        self, argv: list[str], env: dict[str, str], cwd: Path, stdout: Path, stderr: Path
    ) -> ForkedProcess:
        for path in (stdout, stderr):  # there before the child writes, as with Popen
            path.write_bytes(b"")
        request = {
            "argv": argv,
            "env": env,
            "cwd": str(cwd),
            "stdout": str(stdout),
            "stderr": str(stderr),
        }
        with self._lock:
            self._requests.write((json.dumps(request) + "\n").encode())
            self._requests.flush()
            with self._changed:
                if not self._changed.wait_for(lambda: self._pids, timeout=30):
                    raise RuntimeError("the fork server did not answer")
                pid = self._pids.pop(0)
        return ForkedProcess(self, pid, [sys.executable, "-m", "lane_pg", *argv])

    def exit_code(self, pid: int) -> int | None:
        with self._changed:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits, timeout=timeout)
            return self._exits.get(pid)

    def close(self) -> None:
        """End the server (its stdin closed); children still running are the tests' to kill."""
        self._requests.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=10)
        assert self._proc.stdout is not None
        self._proc.stdout.close()


if __name__ == "__main__":
    child = _serve()
    if child is not None:
        _become(child)
        from lane_pg.cli import console_main

        console_main()
    sys.exit(0)
