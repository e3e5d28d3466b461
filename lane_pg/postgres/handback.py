"""PostgresBackend's calls that hand a claimed job back unfinished (MGMT-6, MGMT-7, A2,
A14): ``lane.release_job``, ``lane.delay_job`` and ``lane.give_back_job`` of
sql/functions/30_finish.sql, one call each."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lane_pg.postgres.arguments import token_text
from lane_pg.types import Duration, JobRow, to_millis


class HandBackCalls:
    """The calls, over the ``_job`` statement helper PostgresBackend defines."""

    async def _job(self, function_call: str, *args: Any) -> JobRow:
        raise NotImplementedError

    async def release_job(
        self, queue: str, job_id: str, token: str, *, now: datetime | None = None
    ) -> JobRow:
        return await self._job(
            "lane.release_job($1, $2, $3::uuid, $4)", queue, job_id, token_text(token), now
        )

    async def delay_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        delay: Duration,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        return await self._job(
            "lane.delay_job($1, $2, $3::uuid, $4, $5)",
            queue,
            job_id,
            token_text(token),
            to_millis(delay, "delay"),
            now,
        )

    async def give_back_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        delay: Duration = 0,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        return await self._job(
            "lane.give_back_job($1, $2, $3::uuid, $4, $5)",
            queue,
            job_id,
            token_text(token),
            to_millis(delay, "delay"),
            now,
        )
