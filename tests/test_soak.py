"""The soak's checks (``soak.checks``) fail on what they exist to catch: a job gone before
it was seen finished, a delayed job run early, repeated executions beyond what the faults
allow, a flow parent run without all its children; and the connection finder the
connection-cutting fault uses finds a real connection. The soak itself runs with
``make soak``, not here."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import asyncpg

from soak.checks import Ledger, job_checks
from soak.fleet import local_ports
from soak.traffic import Added, Outcome, Traffic


def traffic(**added: Added) -> Traffic:
    t = Traffic(backend=None, rate=1.0, rng=random.Random(0))  # type: ignore[arg-type]
    for job in added.values():
        t.added[(job.queue, job.id)] = job
    return t


def finish(t: Traffic, job_id: str, state: str = "completed") -> None:
    t.outcomes[("soak", job_id)] = Outcome(state, 0, None)


def write_ledger(directory: Path, *lines: str) -> Ledger:
    (directory / "runs-1.log").write_text("".join(f"{line}\n" for line in lines))
    return Ledger.read(directory)


def verdicts(t: Traffic, ledger: Ledger, bound: int = 0) -> dict[str, bool]:
    return {check.name: check.ok for check in job_checks(t, ledger, bound)}


def test_a_clean_run_passes(tmp_path: Path) -> None:
    t = traffic(
        a=Added("plain", "soak", "1", at=100.0), b=Added("delayed", "soak", "2", 100.0, 2.0)
    )
    finish(t, "1")
    finish(t, "2")
    ledger = write_ledger(tmp_path, "run 1 0 100.5 -", "run 2 0 102.2 -", "run 3 0 1")  # cut
    assert all(verdicts(t, ledger).values())


def test_a_job_gone_before_seen_finished_is_lost_even_if_its_id_ran(tmp_path: Path) -> None:
    t = traffic(a=Added("plain", "soak", "1", at=100.0))
    t.vanished.add(("soak", "1"))
    ledger = write_ledger(tmp_path, "run 1 0 100.5 -")
    assert verdicts(t, ledger)["no job lost"] is False


def test_an_unfinished_job_is_lost(tmp_path: Path) -> None:
    t = traffic(a=Added("plain", "soak", "1", at=100.0))
    assert verdicts(t, write_ledger(tmp_path))["no job lost"] is False


def test_a_delayed_job_run_early_fails(tmp_path: Path) -> None:
    t = traffic(a=Added("delayed", "soak", "1", 100.0, delay=2.0))
    finish(t, "1")
    ledger = write_ledger(tmp_path, "run 1 0 101.5 -")
    assert verdicts(t, ledger)["delayed jobs not early"] is False


def test_repeated_runs_beyond_the_faults_bound_fail(tmp_path: Path) -> None:
    t = traffic(a=Added("plain", "soak", "1", at=100.0), b=Added("retried", "soak", "2", 100.0))
    finish(t, "1")
    finish(t, "2")
    runs = ["run 1 0 101 -", "run 1 0 102 -", *(f"run 2 {n} 10{n} -" for n in range(3))]
    ledger = write_ledger(tmp_path, *runs)
    assert verdicts(t, ledger, bound=1)["duplicates within at-least-once"] is True
    assert verdicts(t, ledger, bound=0)["duplicates within at-least-once"] is False


def test_a_parent_run_with_a_child_missing_fails(tmp_path: Path) -> None:
    t = traffic(a=Added("parent", "soak", "1", at=100.0))
    t.flows["1"] = ["2", "3", "4"]
    finish(t, "1")
    ledger = write_ledger(tmp_path, "run 1 0 101 2")
    assert verdicts(t, ledger)["flow parents after all children"] is False


def test_an_unplanned_failure_fails_and_a_fault_budget_failure_is_counted(tmp_path: Path) -> None:
    t = traffic(a=Added("plain", "soak", "1", at=100.0))
    t.outcomes[("soak", "1")] = Outcome("failed", 1, "MaxAttemptsExceeded: delivered 4 times")
    ledger = write_ledger(tmp_path, "run 1 0 101 -")
    assert verdicts(t, ledger, bound=1)["outcomes as planned"] is True
    assert verdicts(t, ledger, bound=0)["outcomes as planned"] is False
    t.outcomes[("soak", "1")] = Outcome("failed", 1, "RuntimeError: boom")
    assert verdicts(t, ledger, bound=5)["outcomes as planned"] is False


async def test_local_ports_finds_this_process_connection(pg_dsn: str) -> None:
    conn: Any = await asyncpg.connect(pg_dsn)
    try:
        backend_port = await conn.fetchval(
            "SELECT client_port FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        )
        server_port = conn._addr[1]
        assert backend_port in local_ports(os.getpid(), server_port)
    finally:
        await conn.close()
