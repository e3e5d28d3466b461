"""The memory twin of the batch and chain rules of sql/functions/19_batches.sql and
19_chains.sql (settlements, derived progress, callback jobs, the next link, a broken
chain's catch), mixed into ``_Store``, whose transitions they call."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lane_pg.memory._records import (
    _BatchRecord,
    _json_copy,
    _parse_spec,
    _Record,
    _Settlement,
)
from lane_pg.memory._surface import _StoreSurface
from lane_pg.types import BATCH_CALLBACK_JOB, CHAIN_CALLBACK_JOB, CHAIN_CATCH_RETRY, JSON


class _GroupRules(_StoreSurface):
    """The batch and chain rules; ``_Store`` gives the records and ``_insert``."""

    def _batch_settle(self, jobs: Sequence[_Record], outcome: str, now: datetime) -> None:
        """lane._batch_settle: each batch job settles once; batches in id order."""
        by_batch: dict[str, list[_Record]] = {}
        for job in sorted(jobs, key=lambda j: j.key):
            if job.batch_id is not None:
                by_batch.setdefault(job.batch_id, []).append(job)
        for batch_id in sorted(by_batch):
            batch = self._batches.get(batch_id)
            if batch is None:
                continue  # pruned: nothing to settle against
            new_failed = 0
            for job in by_batch[batch_id]:
                key = (job.queue, job.id)
                if key in batch.settlements:
                    continue
                reason = job.failed_reason if outcome == "failed" else None
                batch.settlements[key] = _Settlement(outcome, now, reason)
                new_failed += outcome == "failed"
            self._batch_progress(batch, new_failed, now)

    def _batch_progress(self, batch: _BatchRecord, new_failed: int, now: datetime) -> None:
        """lane._batch_progress: the first failure cancels (unless failures are allowed)
        and enqueues catch; the last settlement finishes and enqueues then and finally."""
        failures = batch.failures()
        first_error = failures[0][1].reason if failures else None
        if new_failed > 0 and len(failures) == new_failed:
            if batch.options.get("allow_failures") is not True and batch.cancelled_at is None:
                batch.cancelled_at = now
            self._batch_callback(batch, "catch", first_error, now)
        if batch.finished_at is None and len(batch.settlements) >= batch.total_jobs:
            batch.finished_at = now
            if not failures and batch.cancelled_at is None:
                self._batch_callback(batch, "then", None, now)
            self._batch_callback(batch, "finally", first_error, now)

    def _batch_callback(
        self, batch: _BatchRecord, kind: str, error: str | None, now: datetime
    ) -> None:
        callback = batch.options.get(kind)
        if not isinstance(callback, str):
            return
        extra = batch.options.get("callback_options")
        options = dict(extra) if isinstance(extra, dict) else dict(CHAIN_CATCH_RETRY)
        options["job_id"] = f"batch-{batch.id}-{kind}"
        data: JSON = {"batch_id": batch.id, "kind": kind, "callback": callback, "error": error}
        queue = str(batch.options["callback_queue"])
        self._insert(queue, _parse_spec(BATCH_CALLBACK_JOB, data, options), now)

    def _chain_add(
        self,
        queue: str,
        name: str,
        data: JSON,
        options: dict[str, JSON],
        chain: dict[str, JSON],
        now: datetime,
    ) -> _Record:
        """lane._chain_add: one link with its chain document; a repeat finds it as it was."""
        link_id = f"{chain['id']}-{chain['index']}"
        job = self._insert(queue, _parse_spec(name, data, {**options, "job_id": link_id}), now)
        if "chain" not in job.options:
            job.options = {**job.options, "chain": chain}
        return job

    def _chain_advance(self, job: _Record, now: datetime) -> None:
        """lane._chain_advance for one completed link: the next link, in this step."""
        chain = job.options["chain"]
        assert isinstance(chain, dict)
        links = chain["links"]
        assert isinstance(links, list)
        if not links:
            return
        following = links[0]
        assert isinstance(following, dict)
        index = chain["index"]
        assert isinstance(index, int)
        options = following["options"]
        assert isinstance(options, dict)
        self._chain_add(
            str(following["queue"]),
            str(following["name"]),
            _json_copy(following["data"]),
            options,
            {**chain, "index": index + 1, "links": links[1:]},
            now,
        )

    def _chain_broken(self, job: _Record, now: datetime) -> None:
        """lane._chain_broken: a link failed for good; the chain's catch job, once."""
        chain = job.options["chain"]
        assert isinstance(chain, dict)
        callback = chain.get("catch")
        if not isinstance(callback, str):
            return
        data: JSON = {
            "chain_id": chain["id"],
            "kind": "catch",
            "callback": callback,
            "error": job.failed_reason,
            "queue": job.queue,
            "job_id": job.id,
            "name": job.name,
        }
        options: dict[str, JSON] = {**CHAIN_CATCH_RETRY, "job_id": f"chain-{chain['id']}-catch"}
        self._insert(str(chain["catch_queue"]), _parse_spec(CHAIN_CALLBACK_JOB, data, options), now)
