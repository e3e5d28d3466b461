"""Steady-state throughput of the in-process lane scheduler, and what its metrics cost.

    python examples/bench_lanes.py             # 100 commands per round, best of 20 rounds
    python examples/bench_lanes.py --rounds 3  # quicker

Three figures, as JSON lines: no-op commands per second spread over 10 lanes, all in one
lane, and over 10 lanes with ``QueueMetrics.local()`` attached (with its overhead against
the first figure). Each manager is built, started and warmed up before it is timed, so
start-up is not counted; a round submits 100 commands and waits for all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from lane_pg.scheduler import FunctionCommand, LaneConfig, LaneManager, QueueMetrics
from lane_pg.types import JSON

COMMANDS = 100


async def noop() -> JSON:
    return None


async def build(lanes: int, metrics: bool) -> LaneManager:
    builder = LaneManager.builder()
    for index in range(lanes):
        builder.with_lane(f"lane-{index}", LaneConfig(1, 10), index)
    if metrics:
        builder.with_metrics(QueueMetrics.local())
    manager = builder.build()
    await manager.start()
    await run_round(manager, lanes)  # warm-up
    return manager


async def run_round(manager: LaneManager, lanes: int) -> float:
    started = time.perf_counter()
    futures = [
        await manager.submit(f"lane-{n % lanes}", FunctionCommand(noop, "noop"))
        for n in range(COMMANDS)
    ]
    await asyncio.gather(*futures)
    return time.perf_counter() - started


async def measure(subjects: list[tuple[int, bool]], rounds: int) -> list[float]:
    """Commands per second of each subject's best round; the subjects take turns round by
    round, so a noisy moment of a shared machine falls on all of them alike."""
    managers = [await build(lanes, metrics) for lanes, metrics in subjects]
    best = [float("inf")] * len(subjects)
    try:
        for _ in range(rounds):
            for index, (manager, (lanes, _)) in enumerate(zip(managers, subjects, strict=True)):
                best[index] = min(best[index], await run_round(manager, lanes))
    finally:
        for manager in managers:
            await manager.stop()
    return [COMMANDS / seconds for seconds in best]


async def main(rounds: int) -> None:
    ten, one, with_metrics = await measure([(10, False), (1, False), (10, True)], rounds)
    overhead = (ten - with_metrics) / ten * 100
    for figure in (
        {"figure": "10 lanes", "commands_per_s": round(ten)},
        {"figure": "1 lane", "commands_per_s": round(one)},
        {
            "figure": "10 lanes, metrics on",
            "commands_per_s": round(with_metrics),
            "metrics_overhead_percent": round(overhead, 1),
        },
    ):
        print(json.dumps(figure))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds per figure (20)")
    asyncio.run(main(parser.parse_args().rounds))
