"""TEST-8: with no usable Redis server at ``LANE_PG_TEST_REDIS`` the Redis tests skip,
saying why, within seconds: the server is probed once per process with short timeouts
(``tests.helpers.probe_redis``), so a dead address costs one probe, not one timeout per
test. Each case runs a pytest of its own against an address of its kind and waits for it
within a bounded time."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Enough tests that one connect or read timeout each (1 s, 10 s) overruns the wait below.
SELECTION = ["tests/conformance/test_add.py", "-k", "redis", "tests/redis/test_upkeep.py"]
WAIT_S = 60  # pytest's start-up and collection, under a loaded machine, fit easily


@contextmanager
def address(kind: str) -> Iterator[str]:
    """A ``redis://`` URL where no Redis answers: ``refused`` (nothing listens), ``mute``
    (a listener that completes connections and never answers: a hung server) or
    ``blackhole`` (a listener whose accept queue is full, so the kernel drops further
    connection attempts: an address that drops packets)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        if kind == "refused":
            listener.close()
            yield f"redis://127.0.0.1:{port}/0"
            return
        listener.listen(0 if kind == "blackhole" else 64)
        fillers = []
        if kind == "blackhole":
            for _ in range(2):  # a backlog of 0 still queues one: fill it
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
                fillers.append(filler)
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            for filler in fillers:
                filler.close()


@pytest.mark.parametrize("kind", ["mute", "blackhole"])  # a refused connect fails at once anyway
def test_the_redis_tests_skip_fast_without_a_server_TEST_8(kind: str) -> None:
    # Not the parent's xdist worker identity: the child would make a worker database.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LANE_PG_"))}
    with address(kind) as url:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", *SELECTION, "-q", "-rs", "-p", "no:cacheprovider"],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**env, "PYTHONPATH": str(REPO), "LANE_PG_TEST_REDIS": url},
            timeout=WAIT_S,
            check=False,
        )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    summary = output.strip().splitlines()[-1]
    assert re.search(r"\d+ skipped", summary) and "passed" not in summary, summary
    assert "error" not in summary and "failed" not in summary, summary
    assert f"no usable Redis at {url}" in output, output
