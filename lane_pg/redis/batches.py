"""Batches and chains on Redis (BATCH, CHAIN): ``lua/add_batch.lua`` and its siblings, one
script per operation, over the keys ``lua/includes/batches.lua`` describes; a chain's head
is ``lua/add_chain.lua`` (``lua/includes/chains.lua``). Each job's settlement, and a
chain's next link or catch job, is written by the script that ends the job, whatever ends
it (complete, fail for good, stall, remove, discard, clean, drain, obliterate, a cancel
that removes the batch's waiting jobs), so a settlement is as atomic as the end itself.

A batch lives in its home queue's tag: its callback queue (the first job's queue unless
``callback_queue`` says otherwise; ``default`` for an empty batch). Every batch has one,
and the settlement that writes a callback job writes the record in the same slot. A batch
is found by its id through a directory in the prefix's own tag (``{prefix}:batches``,
created time per id, and ``{prefix}:batch-homes``, id -> home queue), which the client
writes before the script stores the batch (a script cannot reach another slot): an entry
whose batch was never stored reads as no batch and is dropped by the next prune.

Jobs of one batch or chain may lie in several queues: on a standalone server a script can
reach every key, and the settling script switches to the other queue's keys
(``lua/includes/across.lua``). Redis Cluster cannot run a script over several slots, so
there a batch or chain whose queues (its callback or catch queue included) lie in more
than one slot is refused at add, naming them, before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lane_pg.backend.batches import (
    AddBatch,
    AddToBatch,
    CancelBatch,
    FindBatch,
    ListBatches,
    PruneBatches,
    canonical_batch_id,
    check_batch_id,
    check_batch_name,
    check_batch_options,
    check_chain,
    check_list_batches,
    check_remove_waiting,
    prune_ages,
    refuse_group_options,
)
from lane_pg.backend.jobs import AddChain
from lane_pg.errors import BatchNotFound, JobStateConflict
from lane_pg.redis.backend import RedisBackend, RedisEntity
from lane_pg.redis.rows import (
    SpecFields,
    dump,
    epoch_ms,
    from_ms,
    job_row,
    script_list,
    spec_fields,
)
from lane_pg.types import (
    BATCH_CALLBACK_JOB,
    BATCH_CALLBACK_KINDS,
    CHAIN_CALLBACK_JOB,
    CHAIN_CATCH_RETRY,
    JSON,
    Batch,
    JobRow,
    QueuedSpec,
    validate_queue_name,
)

_PAGE = 200
"""Directory entries read per round trip (list and prune)."""


def grouped_specs(jobs: Sequence[QueuedSpec], what: str) -> list[tuple[str, SpecFields]]:
    """Each job checked as ``add_job`` checks it, without the options a group refuses."""
    checked = []
    for position, job in enumerate(jobs, start=1):
        validate_queue_name(job.queue)
        spec = spec_fields(job.name, job.data, job.options)  # type: ignore[arg-type]
        refuse_group_options(spec.parsed.document, position, job.name, what)
        checked.append((job.queue, spec))
    return checked


class RedisBatches(RedisEntity):
    """The ``batches`` handle on Redis."""

    @property
    def _directory(self) -> str:
        return f"{{{self._backend.prefix}}}:batches"

    @property
    def _homes(self) -> str:
        return f"{{{self._backend.prefix}}}:batch-homes"

    def _record(self, home: str, batch_id: str) -> str:
        return self._backend.keys(home).key(f"batch:{batch_id}")

    async def _home(self, batch_id: str | None) -> str | None:
        if batch_id is None:
            return None
        home: Any = await self._backend.client.hget(self._homes, batch_id)
        return None if home is None else str(home.decode())

    def _groups(self, batch_id: str, jobs: list[tuple[str, SpecFields]]) -> list[JSON]:
        """The jobs by queue (first-appearance order), each stamped with the batch
        (``options.meta.batch_id``), as ``lane_batch_store`` takes them."""
        groups: dict[str, dict[str, Any]] = {}
        for position, (queue, spec) in enumerate(jobs, start=1):
            tag = self._backend.keys(queue).tag
            group = groups.setdefault(
                queue, {"tag": tag, "queue": queue, "positions": [], "specs": []}
            )
            document = dict(spec.parsed.document)
            meta = document.get("meta")
            document["meta"] = {**(meta if isinstance(meta, dict) else {}), "batch_id": batch_id}
            group["positions"].append(position)
            group["specs"].append({**spec.fields, "options": dump(document)})
        return list(groups.values())

    async def add_batch(self, args: AddBatch) -> list[str]:
        batch_id = check_batch_id(args.batch_id)
        check_batch_name(args.name)
        options = check_batch_options(args.options or {})
        jobs = grouped_specs(args.jobs, "job of the batch")
        options.setdefault("callback_queue", jobs[0][0] if jobs else "default")
        home = str(options["callback_queue"])
        queues = [queue for queue, _ in jobs] + [home]
        await self._backend.check_slots(queues, f"batch {batch_id}")
        callbacks: dict[str, JSON] = {}
        extra = options.get("callback_options")
        for kind in BATCH_CALLBACK_KINDS:
            if kind in options:
                callback_options = dict(extra if isinstance(extra, dict) else CHAIN_CATCH_RETRY)
                callback_options["job_id"] = f"batch-{batch_id}-{kind}"
                spec = spec_fields(BATCH_CALLBACK_JOB, None, callback_options)
                callbacks[kind] = {"callback": options[kind], "spec": spec.fields}
        backend = self._backend
        now = await backend.now_ms(args.now)  # the directory's order and the record's time
        await self._enlist(batch_id, home, now)
        for queue in dict.fromkeys(queues):
            await backend.register(queue)
        answer = await backend.call(
            "add_batch",
            home,
            {
                "id": batch_id,
                "name": args.name,
                "total": len(jobs),
                "options": dump(options),
                "callbacks": dump(callbacks),
                "allow_failures": options.get("allow_failures") is True,
                "groups": self._groups(batch_id, jobs),
                "now": now,
            },
        )
        if answer[0] == "exists":
            raise JobStateConflict(f"batch {batch_id} exists already")
        return [str(job_id) for job_id in script_list(answer[1])]

    async def _enlist(self, batch_id: str, home: str, now: int) -> None:
        """The directory entry of a new batch; ``JobStateConflict`` when the id names a
        stored batch of another home (one of the same home, the script refuses)."""
        client = self._backend.client
        known = await self._home(batch_id)
        if known == home:
            return
        if known is not None and await client.exists(self._record(known, batch_id)):
            raise JobStateConflict(f"batch {batch_id} exists already")
        async with client.pipeline(transaction=True) as pipe:
            pipe.hset(self._homes, batch_id, home)
            pipe.zadd(self._directory, {batch_id: now})
            await pipe.execute()

    async def add_to_batch(self, args: AddToBatch) -> list[str]:
        batch_id = canonical_batch_id(args.batch_id)
        home = await self._home(batch_id)
        if batch_id is None or home is None:
            raise BatchNotFound(f"batch {args.batch_id} not found")
        backend = self._backend
        finished: Any = await backend.client.hget(self._record(home, batch_id), "finished_at")
        if finished is not None:
            raise JobStateConflict(
                f"batch {batch_id} finished at {from_ms(finished.decode())}: no job can be"
                " added to it"
            )
        jobs = grouped_specs(args.jobs, "job of the batch")
        queues = [queue for queue, _ in jobs] + [home]
        await backend.check_slots(queues, f"batch {batch_id}")
        for queue in dict.fromkeys(queues):
            await backend.register(queue)
        answer = await backend.call(
            "add_to_batch",
            home,
            {
                "id": batch_id,
                "total": len(jobs),
                "groups": self._groups(batch_id, jobs),
                "now": epoch_ms(args.now),
            },
        )
        if answer[0] == "not_found":
            raise BatchNotFound(f"batch {args.batch_id} not found")
        if answer[0] == "finished":
            raise JobStateConflict(
                f"batch {batch_id} finished at {from_ms(answer[1])}: no job can be added to it"
            )
        return [str(job_id) for job_id in script_list(answer[1])]

    async def _read(self, home: str, ids: list[str]) -> list[Batch | None]:
        answer = await self._backend.call("find_batches", home, {"ids": ids})
        return [
            None if fields is False else _batch(batch_id, fields)
            for batch_id, fields in zip(ids, answer, strict=True)
        ]

    async def find_batch(self, args: FindBatch) -> Batch | None:
        batch_id = canonical_batch_id(args.batch_id)
        home = await self._home(batch_id)
        if batch_id is None or home is None:
            return None
        return (await self._read(home, [batch_id]))[0]

    async def _page(self, ids: list[str]) -> list[Batch]:
        """The batches of ``ids`` that exist, in the order of ``ids``."""
        homes: list[Any] = await self._backend.client.hmget(self._homes, ids)
        by_home: dict[str, list[str]] = {}
        for batch_id, home in zip(ids, homes, strict=True):
            if home is not None:
                by_home.setdefault(home.decode(), []).append(batch_id)
        found: dict[str, Batch] = {}
        for home, members in by_home.items():
            for batch in await self._read(home, members):
                if batch is not None:
                    found[batch.id] = batch
        return [found[batch_id] for batch_id in ids if batch_id in found]

    async def list_batches(self, args: ListBatches) -> list[Batch]:
        limit = check_list_batches(args.limit, args.state)
        state = args.state
        chosen: list[Batch] = []
        start = 0
        while len(chosen) < limit:
            raw: list[Any] = await self._backend.client.zrevrange(
                self._directory, start, start + _PAGE - 1
            )
            if not raw:
                break
            start += len(raw)
            for batch in await self._page([member.decode() for member in raw]):
                if (
                    state is None
                    or (state == "pending" and batch.finished_at is None)
                    or (state == "finished" and batch.finished_at is not None)
                    or (state == "cancelled" and batch.cancelled_at is not None)
                ):
                    chosen.append(batch)
        return chosen[:limit]

    async def cancel_batch(self, args: CancelBatch) -> bool:
        check_remove_waiting(args.remove_waiting)
        batch_id = canonical_batch_id(args.batch_id)
        home = await self._home(batch_id)
        answer = None
        if batch_id is not None and home is not None:
            answer = await self._backend.call(
                "cancel_batch",
                home,
                {"id": batch_id, "remove_waiting": args.remove_waiting, "now": epoch_ms(args.now)},
            )
        if answer is None or answer[0] == "not_found":
            raise BatchNotFound(f"batch {args.batch_id} not found")
        return bool(answer[1])

    async def prune_batches(self, args: PruneBatches) -> int:
        finished_ms, unfinished_ms = prune_ages(args)
        backend = self._backend
        now = await backend.now_ms(args.now)
        finished_cut = now - finished_ms
        unfinished_cut = None if unfinished_ms is None else now - unfinished_ms
        # A batch finishes after it is created: only those created before a cut can go.
        created_cut = max(finished_cut, unfinished_cut if unfinished_cut is not None else 0)
        pruned = 0
        start = 0
        while True:
            raw: list[Any] = await backend.client.zrangebyscore(
                self._directory, "-inf", f"({created_cut}", start=start, num=_PAGE
            )
            if not raw:
                return pruned
            ids = [member.decode() for member in raw]
            homes: list[Any] = await backend.client.hmget(self._homes, ids)
            gone: list[str] = []
            by_home: dict[str, list[str]] = {}
            for batch_id, home in zip(ids, homes, strict=True):
                if home is None:
                    gone.append(batch_id)
                else:
                    by_home.setdefault(home.decode(), []).append(batch_id)
            for home, members in by_home.items():
                done, missing = await backend.call(
                    "prune_batches",
                    home,
                    {
                        "ids": members,
                        "finished_cut": finished_cut,
                        "unfinished_cut": unfinished_cut,
                    },
                )
                pruned += len(script_list(done))
                gone += script_list(done) + script_list(missing)
            if gone:
                async with backend.client.pipeline(transaction=True) as pipe:
                    pipe.zrem(self._directory, *gone)
                    pipe.hdel(self._homes, *gone)
                    await pipe.execute()
            start += len(ids) - len(gone)


def _batch(batch_id: str, fields: dict[str, Any]) -> Batch:
    total = int(fields["total"])
    failed = [str(job_id) for job_id in script_list(fields["failed_ids"])]
    cancelled = fields.get("cancelled_at")
    finished = fields.get("finished_at")
    return Batch(
        batch_id,
        fields["name"],
        total,
        max(0, total - int(fields["settled"])),
        len(failed),
        tuple(failed),
        json_object(fields["options"]),
        from_ms(fields["created_at"]),
        None if cancelled is None else from_ms(cancelled),
        None if finished is None else from_ms(finished),
    )


def json_object(text: str) -> dict[str, JSON]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


async def add_chain(backend: RedisBackend, args: AddChain) -> JobRow:
    """``jobs.add_chain`` (lua/add_chain.lua): every link checked and built here, each
    with its ``options.chain`` (``id``, ``index``, the ``links`` after it, ``catch``,
    ``catch_queue``) and the id ``<chain_id>-<index>``; the head stored, carrying the rest."""
    check_chain(args.chain_id, args.links, args.catch, args.catch_queue)
    links = grouped_specs(args.links, "link of the chain")
    catch_queue = args.catch_queue or links[0][0]
    queues = [queue for queue, _ in links] + ([catch_queue] if args.catch is not None else [])
    await backend.check_slots(queues, f"chain {args.chain_id}")
    later: list[JSON] = [
        {
            "queue": queue,
            "name": spec.fields["name"],
            "data": json.loads(str(spec.fields["data"])),
            "options": spec.parsed.document,
        }
        for queue, spec in links
    ]
    entries = []
    for index, ((queue, spec), link) in enumerate(zip(links, args.links, strict=True)):
        chain: dict[str, JSON] = {"id": args.chain_id, "index": index, "links": later[index + 1 :]}
        if args.catch is not None:
            chain["catch"] = args.catch
        chain["catch_queue"] = catch_queue
        document = {**spec.parsed.document, "job_id": f"{args.chain_id}-{index}"}
        fields = spec_fields(link.name, link.data, document).fields
        fields["options"] = dump({**document, "chain": chain})
        entries.append(dump({"tag": backend.keys(queue).tag, "queue": queue, "spec": fields}))
    catch = None
    if args.catch is not None:
        spec = spec_fields(
            CHAIN_CALLBACK_JOB,
            None,
            {**CHAIN_CATCH_RETRY, "job_id": f"chain-{args.chain_id}-catch"},
        )
        catch = dump(
            {
                "tag": backend.keys(catch_queue).tag,
                "chain_id": args.chain_id,
                "callback": args.catch,
                "spec": spec.fields,
            }
        )
    for queue in dict.fromkeys(queues):
        await backend.register(queue)
    head_queue = links[0][0]
    answer = await backend.call(
        "add_chain",
        head_queue,
        {"head": entries[0], "rest": dump(entries[1:]), "catch": catch, "now": epoch_ms(args.now)},
    )
    return job_row(head_queue, answer)
