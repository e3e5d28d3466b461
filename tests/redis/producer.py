"""A producer process of the Redis worker scenarios (tests/redis/test_worker_scenarios.py):
``python -m tests.redis.producer URL QUEUE GO_FILE SPEC``. It connects (``URL`` names the
server and key prefix), prints ``ready``, waits for ``GO_FILE`` to exist (so two producers
start their adds together), then makes ``spec["count"]`` adds and prints one JSON list:
for ``kind`` ``add`` the id each add returned, for ``debounce`` ``[id, replaced_id]`` per
dispatch (each with a token of its own)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from lane_pg.backend.url import connect


async def main(url: str, queue: str, go: Path, spec: dict[str, Any]) -> None:
    backend = await connect(url)
    try:
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while not await asyncio.to_thread(go.exists):
            if time.monotonic() > deadline:
                raise SystemExit("no go file within 30 s")
            await asyncio.sleep(0.01)
        answers: list[Any] = []
        for _ in range(int(spec["count"])):
            if spec["kind"] == "debounce":
                options = json.loads(json.dumps(spec["options"]))
                options["deduplication"]["token"] = uuid.uuid4().hex
                added = await backend.dedup.add_debounced_job(
                    queue, spec["name"], spec.get("data"), options
                )
                answers.append([added.job.id, added.replaced_id])
            else:
                job = await backend.add_job(queue, spec["name"], spec.get("data"), spec["options"])
                answers.append(job.id)
        print(json.dumps(answers), flush=True)
    finally:
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), json.loads(sys.argv[4])))
