"""The soak's own servers: a PostgreSQL cluster and a Redis server on free ports, in a
directory of the run's, so the faults (an immediate restart, every connection killed) never
touch the machine's shared servers or another program's data.

PostgreSQL comes from the machine's binaries (``pg_config --bindir``, else Debian's
``/usr/lib/postgresql/*/bin``); as root, it runs as the ``postgres`` user, which initdb
requires. Redis keeps an append-only file fsynced on every write (``appendfsync always``),
the setting a queue that must not lose an acknowledged job needs: its restart is a SIGKILL
and a start on the same file.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_port(port: int, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise RuntimeError(f"{what} did not accept connections on port {port}: {tail}")


def postgres_bindir() -> Path:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if not versions:
        raise RuntimeError("no PostgreSQL server binaries (initdb) found: install postgresql")
    return Path(versions[0]).parent


class PostgresServer:
    """A private cluster: ``start``, ``restart`` (``-m immediate``: a crash, then WAL
    recovery), ``stop``; ``dsn`` names its ``soak`` database."""

    def __init__(self, root: Path, *, max_connections: int = 100, log_connections: bool = False):
        self.bindir = postgres_bindir()
        self.data = root / "pgdata"
        self.log = root / "postgres.log"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        self.max_connections = max_connections
        self.log_connections = log_connections
        root.mkdir(parents=True, exist_ok=True)
        if self.as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(root, user.pw_uid, user.pw_gid)
            # The run's directory (mkdtemp makes it 0700) must let that user through.
            root.parent.chmod(root.parent.stat().st_mode | 0o011)

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/soak"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stdout}{done.stderr}")
        return done

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                      "--no-sync", "-E", "UTF8")  # fmt: skip
            settings = [
                f"port = {self.port}",
                "listen_addresses = '127.0.0.1'",
                "unix_socket_directories = ''",
                f"max_connections = {self.max_connections}",
                "shared_buffers = 256MB",
                "fsync = on",
                "synchronous_commit = on",
                f"log_connections = {'on' if self.log_connections else 'off'}",
                "log_line_prefix = '%m [%p] '",
            ]
            with (self.data / "postgresql.conf").open("a") as conf:
                conf.write("\n".join(settings) + "\n")
            self._pg_ctl_start()
            subprocess.run(
                ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d",
                 "postgres", "-qc", "CREATE DATABASE soak"],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
        else:
            self._pg_ctl_start()

    def _pg_ctl_start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        _wait_port(self.port, START_TIMEOUT, "PostgreSQL", self.log)

    def restart(self) -> float:
        """An immediate stop (no checkpoint: recovery replays the WAL) and a start; the
        seconds the server was away."""
        began = time.monotonic()
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        self._pg_ctl_start()
        return time.monotonic() - began

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)


class RedisServer:
    """A private redis-server with an fsync-always append-only file; ``restart`` is a
    SIGKILL and a start on the same file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.log = root / "redis.log"
        self.process: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.binary = binary

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.root), "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--logfile", str(self.log)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(self.port, START_TIMEOUT, "Redis", self.log)
        # Accepting connections comes before the append-only file is loaded: wait for it.
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["redis-cli", "-p", str(self.port), "PING"], capture_output=True, text=True
            )
            if out.stdout.strip() == "PONG":
                return
            time.sleep(0.05)
        raise RuntimeError(f"Redis did not load its data: {self.log.read_text()[-2000:]}")

    def restart(self) -> float:
        began = time.monotonic()
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.start()
        return time.monotonic() - began

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
