"""``python -m lane_pg`` processes of the dashboard tests (a dashboard, a worker), their
output in a file."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import stop_process

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Process:
    """A ``python -m lane_pg`` process whose output goes to a file."""

    popen: subprocess.Popen[bytes]
    output: Path

    def text(self) -> str:
        return self.output.read_text(errors="replace")


def spawn(args: list[str], dsn: str, directory: Path, env: dict[str, str] | None = None) -> Process:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LANE_PG_DASHBOARD")}
    environment.update({"LANE_PG_DSN": dsn, "PYTHONPATH": str(REPO), **(env or {})})
    output = directory / f"{args[0]}-{len(list(directory.glob('*.out')))}.out"
    with output.open("wb") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "lane_pg", *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=REPO,
        )
    return Process(popen, output)


async def dashboard_url(process: Process) -> str:
    """The address the dashboard prints once it listens."""
    for _ in range(600):
        found = re.search(r"dashboard at (http://\S+/)", process.text())
        if found:
            return found.group(1).rstrip("/")
        if process.popen.poll() is not None:
            break
        await asyncio.sleep(0.05)
    raise AssertionError(f"the dashboard did not start:\n{process.text()}")


def stop(process: Process) -> None:
    stop_process(process.popen)
