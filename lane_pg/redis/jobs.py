"""Adding, reading and changing single jobs (ADD, MGMT) on Redis: ``add_jobs.lua`` stores
(with the deduplication and series claims of ``includes/add.lua``; a call of plain specs
runs the batched ``add_plain_jobs.lua``), a job's hash is read
with one HGETALL, and each management operation is the script of its name
(``promote_job.lua``, ``retry_job.lua``, ...). The arguments are checked here first, as
``lane_pg.memory`` checks them, so an invalid one runs no script; what a script refuses (a
missing job, a state, a lost lease) it answers before writing anything."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any

from lane_pg.backend.jobs import (
    AddChain,
    AddJob,
    AddJobs,
    GetJob,
    GetJobFinishedResult,
    GetJobState,
    PromoteJob,
    RemoveJob,
    RescheduleJob,
    RetryJob,
    SaveJobStacktrace,
    UpdateJobData,
    UpdateJobPriority,
    UpdateJobProgress,
)
from lane_pg.errors import InvalidOptions, JobLocked, JobStateConflict
from lane_pg.redis.backend import RedisEntity, refused
from lane_pg.redis.dedup import dedup_fields
from lane_pg.redis.keys import QueueKeys
from lane_pg.redis.repeats import call_scheduled, first_ticks, raise_refusal, series_fields
from lane_pg.redis.rows import (
    SpecFields,
    added_row,
    canonical_token,
    dump,
    epoch_ms,
    from_ms,
    job_row,
    spec_fields,
)
from lane_pg.types import (
    JSON,
    Completed,
    Failed,
    FinishedResult,
    JobRow,
    JobState,
    NotFinished,
    check_json,
    to_millis,
    validate_priority,
    validate_queue_name,
    validate_stacktrace,
)


def checked_specs(specs: list[tuple[str, Any, Any]]) -> list[SpecFields]:
    """Each spec checked (``lane_pg.options``) with the fields ``includes/add.lua`` stores,
    its deduplication and series parts included. Flows are not on Redis yet, so no spec
    here is a flow node (a kept next job never has a parent or children)."""
    checked = []
    for name, data, options in specs:
        spec = spec_fields(name, data, options)
        if options is None:  # no options claim no owner
            spec.fields["dedup"] = spec.fields["series"] = None
        else:
            spec.fields["dedup"] = dedup_fields(spec.parsed)
            spec.fields["series"] = series_fields(name, spec.parsed)
        checked.append(spec)
    return checked


def fence(token: str | None) -> str | None:
    """A write's token as the scripts compare it: None for an administrator's write, else
    the canonical UUID text ('' for a text that is no UUID: it matches no job)."""
    return None if token is None else canonical_token(token) or ""


_NOT_DELAYED = ", not delayed: cannot "
_NOT_FINISHED = ": only completed or failed jobs can be retried"


class RedisJobs(RedisEntity):
    """The ``jobs`` handle on Redis."""

    async def add_job(self, args: AddJob) -> JobRow:
        return (await self._add(args.queue, [(args.name, args.data, args.options)], args.now))[0]

    async def add_jobs(self, args: AddJobs) -> list[JobRow]:
        specs = [(spec.name, spec.data, spec.options) for spec in args.specs]
        return await self._add(args.queue, specs, args.now)

    async def add_chain(self, args: AddChain) -> JobRow:
        from lane_pg.redis.batches import add_chain

        return await add_chain(self._backend, args)

    async def _add(
        self, queue: str, specs: list[tuple[str, Any, Any]], now: datetime | None
    ) -> list[JobRow]:
        validate_queue_name(queue)
        checked = checked_specs(specs)
        if not checked:
            return []
        backend = self._backend
        moment = epoch_ms(now)
        cron: dict[str, int | None] = {}
        if any(spec.parsed.repeat is not None for spec in checked):
            moment = await backend.now_ms(now)  # ADD-13 and the first ticks, at one instant
            cron = first_ticks([(spec.fields["name"], spec.parsed) for spec in checked], moment)
        await backend.register(queue)
        fields = [spec.fields for spec in checked]
        if all(f["id"] is None and f["dedup"] is None and f["series"] is None for f in fields):
            # No owner to take, no custom id to look up: the batched script (its header),
            # sent the fields that are set only (half the JSON to encode and decode).
            plain = [{key: value for key, value in f.items() if value is not None} for f in fields]
            answer = await backend.call("add_plain_jobs", queue, {"now": moment, "specs": plain})
        else:
            answer = await call_scheduled(
                backend, "add_jobs", queue, {"now": moment, "specs": fields, "cron": cron}
            )
        raise_refusal(answer)
        created_at = from_ms(answer["now"])
        return [
            added_row(queue, checked[entry[0] - 1], entry, created_at)
            if isinstance(entry, list)
            else job_row(queue, entry)
            for entry in answer["jobs"]
        ]

    async def _fields(self, queue: str, job_id: str) -> dict[str, str] | None:
        raw: Any = await self._backend.client.hgetall(self._backend.keys(queue).job(job_id))
        if not raw:
            return None
        return {key.decode(): value.decode() for key, value in raw.items()}

    async def get_job(self, args: GetJob) -> JobRow | None:
        fields = await self._fields(args.queue, args.job_id)
        if fields is None:
            return None
        keys = self._backend.keys(args.queue)
        logs = await self._backend.client.llen(keys.key(f"logs:{args.job_id}"))
        row = job_row(args.queue, fields)
        expires_at = None  # MGMT-1: its dedup owner's expiry while the owner names it
        if "dedup_id" in fields:
            owner: Any = await self._backend.client.hmget(
                keys.key(f"dedup:{fields['dedup_id']}"), ["job_key", "expires_at"]
            )
            if owner[0] is not None and owner[0].decode() == fields["key"] and owner[1]:
                expires_at = from_ms(owner[1].decode())
        return replace(
            row,
            logs_count=int(logs),
            deduplication_expires_at=expires_at,
            child_ids=await self._child_ids(keys, fields),
        )

    async def _child_ids(
        self, keys: QueueKeys, fields: dict[str, str]
    ) -> tuple[tuple[str, str], ...]:
        """A parent's children in attach order (its dependency rows, lua/includes/flows.lua:
        `<queue>\n<id>` -> `bucket|policy|seq|...`)."""
        if "deps_pending" not in fields:
            return ()
        raw: Any = await self._backend.client.hgetall(keys.key(f"deps:{fields['key']}"))
        refs = sorted(
            (int(record.decode().split("|")[2]), ref.decode()) for ref, record in raw.items()
        )
        return tuple(
            (queue, child_id) for _, (queue, child_id) in ((s, r.split("\n", 1)) for s, r in refs)
        )

    async def get_job_state(self, args: GetJobState) -> JobState | None:
        row = await self.get_job(GetJob(args.queue, args.job_id))
        return None if row is None else row.state

    async def get_job_finished_result(self, args: GetJobFinishedResult) -> FinishedResult | None:
        fields = await self._fields(args.queue, args.job_id)
        if fields is None:
            return None
        row = job_row(args.queue, fields)
        if row.state == "completed":
            return Completed(row.return_value)
        if row.state == "failed":
            return Failed(row.failed_reason or "")
        return NotFinished(row.state)

    async def _change(
        self, script: str, queue: str, job_id: str, arguments: dict[str, JSON]
    ) -> Any:
        """Run a management script on job ``job_id``: its answer, ``[status, ...]``, after
        ``not_found`` / ``lock_mismatch`` were raised."""
        validate_queue_name(queue)
        answer = await self._backend.call(script, queue, {"id": job_id, **arguments})
        if answer[0] in ("not_found", "lock_mismatch"):
            refused(answer[0], queue, job_id)
        return answer

    async def _changed(
        self, script: str, queue: str, job_id: str, arguments: dict[str, JSON], conflict: str = ""
    ) -> JobRow:
        """The job a management script changed. A state it refused raises
        ``JobStateConflict``: "job <id> is <state>" and ``conflict`` (SQL's wording)."""
        answer = await self._change(script, queue, job_id, arguments)
        if answer[0] == "conflict":
            raise JobStateConflict(f"job {job_id} is {answer[1]}{conflict}")
        return job_row(queue, answer[1])

    async def promote_job(self, args: PromoteJob) -> JobRow:
        now = epoch_ms(args.now)
        return await self._changed(
            "promote_job", args.queue, args.job_id, {"now": now}, _NOT_DELAYED + "promote it"
        )

    async def reschedule_job(self, args: RescheduleJob) -> JobRow:
        delay_ms = to_millis(args.delay, "delay")
        return await self._changed(
            "reschedule_job",
            args.queue,
            args.job_id,
            {"delay_ms": delay_ms, "now": epoch_ms(args.now)},
            _NOT_DELAYED + "reschedule it",
        )

    async def retry_job(self, args: RetryJob) -> JobRow:
        from lane_pg.redis.repeats import raise_refusal

        validate_queue_name(args.queue)
        now = epoch_ms(args.now)
        while True:
            # A unique job loses its owner token (A9): the options text without it is made
            # here (a script never decodes user JSON), checked against the stored text.
            fields = await self._fields(args.queue, args.job_id)
            stored = None if fields is None else fields.get("options")
            arguments: dict[str, JSON] = {"now": now, "options_was": stored}
            if stored is not None:
                arguments["options"] = dump(_without_dedup_token(json.loads(stored)))
            answer = await self._backend.call(
                "retry_job", args.queue, {"id": args.job_id, **arguments}
            )
            raise_refusal(answer)
            if answer[0] == "not_found":
                refused("not_found", args.queue, args.job_id)
            if answer[0] == "stale":
                continue
            if answer[0] == "conflict":
                raise JobStateConflict(f"job {args.job_id} is {answer[1]}{_NOT_FINISHED}")
            return job_row(args.queue, answer[1])

    async def remove_job(self, args: RemoveJob) -> bool:
        answer = await self._change(
            "remove_job", args.queue, args.job_id, {"now": epoch_ms(args.now)}
        )
        if answer[0] == "locked":
            raise JobLocked(
                f"job {args.job_id} is active under a lease until {from_ms(answer[1])}:"
                " it cannot be removed"
            )
        return bool(answer[0] == "ok")

    async def update_job_data(self, args: UpdateJobData) -> JobRow:
        data = dump(check_json(args.data, "data"))
        return await self._changed(
            "update_job_data", args.queue, args.job_id, {"data": data, "token": fence(args.token)}
        )

    async def update_job_progress(self, args: UpdateJobProgress) -> JobRow:
        progress = dump(check_json(args.progress, "progress"))
        return await self._changed(
            "update_job_progress",
            args.queue,
            args.job_id,
            {"progress": progress, "token": fence(args.token), "now": epoch_ms(args.now)},
        )

    async def update_job_priority(self, args: UpdateJobPriority) -> JobRow:
        validate_priority(args.priority)
        if args.lifo is not None and not isinstance(args.lifo, bool):
            raise InvalidOptions(f"lifo must be a boolean or None, got {args.lifo!r}")
        return await self._changed(
            "update_job_priority",
            args.queue,
            args.job_id,
            {"priority": args.priority, "lifo": args.lifo},
        )

    async def save_job_stacktrace(self, args: SaveJobStacktrace) -> JobRow:
        entries, reason = validate_stacktrace(args.stacktrace, args.failed_reason)
        return await self._changed(
            "save_job_stacktrace",
            args.queue,
            args.job_id,
            {"stacktrace": dump(entries), "reason": reason},
        )


def _without_dedup_token(options: Any) -> Any:
    """Job options whose ``deduplication`` has no ``token`` (a retried unique job, A9)."""
    dedup = options.get("deduplication") if isinstance(options, dict) else None
    if not isinstance(dedup, dict):
        return options
    return {**options, "deduplication": {k: v for k, v in dedup.items() if k != "token"}}
