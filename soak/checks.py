"""What the soak checks at the end, from the ledger, the traffic's records and the server.

Each check is a line of the report: its name, what it saw, and whether it passed. The
ledger says which handlers ran (``soak.app.record``); the traffic says what was added and
what each job ended as; the server says what is left behind.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.traffic import (
    BATCH_SIZE,
    CHAIN_LENGTH,
    EXPECTED_RUNS,
    FLOW_CHILDREN,
    SERIES_EVERY,
    Traffic,
)

BUDGET_REASONS = ("stalled more than allowable limit", "MaxAttemptsExceeded")
"""A job lost by its worker more often than ``max_stalled_count`` (1), or whose deliveries,
lost ones included, spent its attempts, fails for good with one of these reasons: an
outcome of the faults, visible in the failed store, counted against the faults' bound."""


@dataclass
class Check:
    name: str
    seen: str
    ok: bool


@dataclass
class Ledger:
    runs: dict[str, list[tuple[int, float, str]]] = field(default_factory=lambda: defaultdict(list))
    """job id -> (attempt, time, extra) of every handler run."""
    fires: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    items: Counter[str] = field(default_factory=Counter)
    steps: dict[str, dict[int, float]] = field(default_factory=lambda: defaultdict(dict))
    step_runs: int = 0
    thens: Counter[str] = field(default_factory=Counter)

    @classmethod
    def read(cls, directory: Path) -> Ledger:
        ledger = cls()
        for path in directory.glob("runs-*.log"):
            for line in path.read_text().splitlines():
                parts = line.split(" ")
                if len(parts) != 5:
                    continue  # a line cut by a SIGKILL mid-write
                event, key, attempt, at, extra = parts
                if event == "run":
                    ledger.runs[key].append((int(attempt), float(at), extra))
                elif event == "fire":
                    ledger.fires[extra].add(key)
                elif event == "item":
                    ledger.items[key] += 1
                elif event == "step":
                    ledger.step_runs += 1
                    step = int(extra)
                    ledger.steps[key][step] = min(ledger.steps[key].get(step, float(at)), float(at))
                elif event == "then":
                    ledger.thens[key] += 1
        return ledger


def job_checks(traffic: Traffic, ledger: Ledger, duplicates_bound: int) -> list[Check]:
    checks = []
    added = traffic.added
    # Every acknowledged add was seen finished. Retention removes finished jobs only, and
    # keeps the newest 10,000 completed: minutes of this traffic against reads every 3 s,
    # so a job gone before it was seen finished is lost (a job id proves nothing by its
    # runs: a server that lost its data hands the same ids out again).
    unfinished = [key for key in traffic.pending() if key not in traffic.vanished]
    lost = len(unfinished) + len(traffic.vanished)
    checks.append(Check(
        "no job lost",
        f"{len(added)} tracked jobs: {len(traffic.outcomes)} seen finished,"
        f" {len(unfinished)} not finished, {len(traffic.vanished)} gone before seen finished",
        lost == 0,
    ))  # fmt: skip
    wrong, stall_failed = [], 0
    for key, outcome in traffic.outcomes.items():
        kind = added[key].kind
        expected = "failed" if kind == "doomed" else "completed"
        if outcome.state == expected:
            continue
        reason = outcome.failed_reason or ""
        if outcome.state == "failed" and any(r in reason for r in BUDGET_REASONS):
            stall_failed += 1
            continue
        wrong.append(f"{kind} {key[1]} {outcome.state}: {outcome.failed_reason}")
    checks.append(Check(
        "outcomes as planned",
        f"{len(wrong)} unexpected" + (f" (first: {wrong[0]})" if wrong else "")
        + f"; {stall_failed} failed for good by faults (stall limit or attempts spent),"
        f" at most {duplicates_bound} allowed",
        not wrong and stall_failed <= duplicates_bound,
    ))  # fmt: skip
    never_ran = [
        key for key, outcome in traffic.outcomes.items()
        if outcome.state == "completed" and key[1] not in ledger.runs
    ]  # fmt: skip
    checks.append(Check(
        "completed jobs ran",
        f"{len(never_ran)} completed without a run in the ledger",
        not never_ran,
    ))  # fmt: skip
    extra = 0
    for key, a in added.items():
        runs = len(ledger.runs.get(key[1], ()))
        extra += max(0, runs - EXPECTED_RUNS.get(a.kind, 1))
    extra += sum(max(0, n - 1) for n in ledger.items.values())
    extra += sum(max(0, n - 1) for n in ledger.thens.values())
    extra += max(0, ledger.step_runs - sum(len(s) for s in ledger.steps.values()))
    checks.append(Check(
        "duplicates within at-least-once",
        f"{extra} repeated executions; the faults allow at most {duplicates_bound}",
        extra <= duplicates_bound,
    ))  # fmt: skip
    early = [
        key for key, a in added.items()
        if a.delay and key[1] in ledger.runs
        and min(at for _, at, _ in ledger.runs[key[1]]) < a.at + a.delay - 0.01
    ]  # fmt: skip
    delayed = sum(1 for a in added.values() if a.delay)
    checks.append(Check(
        "delayed jobs not early", f"{len(early)} of {delayed} ran before their delay", not early
    ))  # fmt: skip
    bad_parents = [
        parent for parent in traffic.flows
        if any(extra != str(FLOW_CHILDREN) for _, _, extra in ledger.runs.get(parent, ()))
    ]  # fmt: skip
    checks.append(Check(
        "flow parents after all children",
        f"{len(bad_parents)} of {len(traffic.flows)} parents ran with a child missing",
        not bad_parents,
    ))  # fmt: skip
    batches = traffic.batches
    incomplete = [
        b for b, tag in batches.items()
        if b not in traffic.finished_batches or ledger.thens[b] < 1
        or any(ledger.items[f"{tag}/{i}"] < 1 for i in range(BATCH_SIZE))
    ]  # fmt: skip
    checks.append(Check(
        "batches finished, then ran",
        f"{len(batches) - len(incomplete)} of {len(batches)}"
        + (f" (first not: {incomplete[0]})" if incomplete else ""),
        not incomplete,
    ))  # fmt: skip
    broken = []
    for tag in traffic.chains:
        steps = ledger.steps.get(tag, {})
        times = [steps.get(i) for i in range(CHAIN_LENGTH)]
        if None in times or times != sorted(times):  # type: ignore[type-var]
            broken.append(tag)
    checks.append(Check(
        "chains ran every link in order",
        f"{len(traffic.chains) - len(broken)} of {len(traffic.chains)}",
        not broken,
    ))  # fmt: skip
    return checks


FAILED_LINE = re.compile(r"job (\S+)/(\S+) \(\S+\) failed for good")


def logged_failures_check(traffic: Traffic, directory: Path) -> Check:
    """Every job that failed for good is named by an error line in its worker's log."""
    logged = set()
    for path in directory.glob("worker-*.log"):
        logged.update(FAILED_LINE.findall(path.read_text(errors="replace")))
    failed = [key for key, outcome in traffic.outcomes.items() if outcome.state == "failed"]
    # A flow parent failed by its child's failure is failed in that child's transaction:
    # the log names the child, whose failure is the cause.
    silent = [
        key for key in failed
        if key not in logged and not _child_logged(traffic.outcomes[key].failed_reason, logged)
    ]  # fmt: skip
    return Check(
        "every failure logged",
        f"{len(failed) - len(silent)} of {len(failed)} failed jobs named in the workers' logs"
        + (f" (first silent: {silent[0][0]}/{silent[0][1]})" if silent else ""),
        not silent,
    )


CHILD_FAILED = re.compile(r"child (\S+) of queue (\S+) failed")


def _child_logged(reason: str | None, logged: set[tuple[str, str]]) -> bool:
    found = CHILD_FAILED.search(reason or "")
    return found is not None and (found.group(2), found.group(1)) in logged


def series_check(ledger: Ledger, keys: list[str], seconds: float, kills: int) -> Check:
    expected = seconds / SERIES_EVERY
    counts = {key: len(ledger.fires.get(key, ())) for key in keys}
    # Outages delay fires (a restart, the leader lost); a fire is never doubled, so the
    # upper bound is the schedule's own count plus one.
    ok = all(expected * 0.8 <= n <= expected + 1 + kills for n in counts.values())
    seen = ", ".join(f"{n}" for n in counts.values())
    return Check("repeat series fired on schedule", f"fires {seen}; due ~{expected:.0f} each", ok)


async def postgres_checks(conn: Any, live_workers: set[str]) -> list[Check]:
    """What must not be left in the tables once everything finished."""

    async def count(query: str) -> int:
        value: int = await conn.fetchval(query)
        return value

    left = await count("SELECT count(*) FROM lane.jobs WHERE state NOT IN ('completed', 'failed')")
    leased = await conn.fetch(
        "SELECT worker_id, count(*) FROM lane.jobs WHERE lock_token IS NOT NULL GROUP BY worker_id"
    )
    dead_leases = sum(r["count"] for r in leased if r["worker_id"] not in live_workers)
    orphans = {
        "flow dependencies of no parent": await count(
            "SELECT count(*) FROM lane.flow_deps d WHERE NOT EXISTS"
            " (SELECT 1 FROM lane.jobs j WHERE j.key = d.parent_key)"
        ),
        "deduplication owners of a finished job": await count(
            "SELECT count(*) FROM lane.dedup_owners o WHERE o.job_key IS NOT NULL"
            " AND (o.expires_at IS NULL OR o.expires_at > now()) AND NOT EXISTS"
            " (SELECT 1 FROM lane.jobs j WHERE j.key = o.job_key"
            "  AND j.state NOT IN ('completed', 'failed'))"
        ),
        "repeat series left": await count("SELECT count(*) FROM lane.repeat_schedulers"),
        "unfinished batches": await count(
            "SELECT count(*) FROM lane.batches WHERE finished_at IS NULL"
        ),
    }
    return [
        Check("nothing left waiting", f"{left} jobs not finished", left == 0),
        Check("no lease left on a dead worker", f"{dead_leases} jobs leased", dead_leases == 0),
        Check(
            "no orphan rows",
            ", ".join(f"{name}: {n}" for name, n in orphans.items()),
            not any(orphans.values()),
        ),
    ]


def size_check(samples: list[tuple[float, float]], what: str, minutes: float) -> Check:
    """The last size against the size a third of the way in: a steady load with the
    shipped retention must plateau (a run under 10 minutes only reports)."""
    if not samples:
        return Check(f"{what} bounded", "no samples", False)
    third = samples[len(samples) // 3][1]
    peak = max(size for _, size in samples)
    last = samples[-1][1]
    seen = f"{samples[0][1]:.1f} -> {third:.1f} (1/3) -> peak {peak:.1f} -> {last:.1f} MB"
    if minutes < 10:
        return Check(f"{what} bounded", seen + " (reported only: run under 10 min)", True)
    return Check(f"{what} bounded", seen + "; last <= 2x the size at 1/3", last <= 2 * third)
