"""The Hypothesis state machine of jobs, shared by every backend's test: a backend against
the memory model.

Every rule applies the same operation, at the same logical time, to a real backend and to
the MemoryBackend (the reference semantics), then compares everything a user can observe:
return values, every job's snapshot, counts, and the event stream (STATE-1, CLAIM-*,
STALL-*, FIN-*, RETRY-*, PAUSE-1). Generated ids and lock tokens differ between the two
backends, so the machine keeps a mapping from the model's ids and tokens to the real ones.

The rules live here once; ``tests/postgres/test_state_machine.py`` and
``tests/redis/test_state_machine.py`` give each its backend, its cleanup and its settings.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import LaneError
from lane_pg.memory import MemoryBackend
from lane_pg.types import (
    ALL_STATES,
    Backoff,
    Completion,
    DeduplicationOptions,
    Failure,
    JobOptions,
    JobRateLimit,
    JobRow,
    JobSpec,
    JobState,
    LeaseRef,
    QueueDemand,
)
from lane_pg.types.flows import ChildRef, Flow, FlowJob
from lane_pg.types.schedule import RepeatOptions
from tests.helpers import precondition_named

T = TypeVar("T")

# Fields whose values legitimately differ between backends: ids and tokens are mapped,
# sequence numbers come from database-wide sequences shared with other tests.
# A flow child's parent id and a reason naming a child hold ids: compared mapped.
_UNCOMPARED = {
    "id",
    "queue",
    "lock_token",
    "order_key",
    "enqueued_seq",
    "worker_id",
    "parent_id",
    "failed_reason",
    "deferred_failure",
    "stacktrace",
}
_POLICIES = [
    None,
    "fail_parent_on_failure",
    "ignore_dependency_on_failure",
    "remove_dependency_on_failure",
    "continue_parent_on_failure",
]
# A flow node's keep-last deduplication id, shared with add_deduplicated's (DEDUP-17..19).
_FLOW_DEDUP = [None, None, None, "a", "b"]
_CHILD_REASON = re.compile(r"^child (\S+) of queue (\S+) failed: ")


@dataclass
class Held:
    """A lease as the test's fake worker holds it, in both backends."""

    model_id: str
    model_token: str
    real_token: str


class JobStateMachine(RuleBasedStateMachine):
    """The rules and invariants; a backend's test subclasses it with ``real`` (the backend
    compared with the model) and a ``teardown`` that deletes what an example wrote."""

    # One loop for all the examples of a test: opening a pool or a client per example
    # cost ~0.2 s of each. Every example has a queue (PostgreSQL) or a key prefix (Redis)
    # of its own.
    loop: ClassVar[asyncio.AbstractEventLoop]
    real: JobQueueBackend

    def __init__(self) -> None:
        super().__init__()
        self.queue = f"sm_{uuid.uuid4().hex[:12]}"
        start = datetime.now(UTC).replace(microsecond=0)
        self.now = start
        self.model = MemoryBackend(clock=lambda: self.now)
        self.ids: dict[str, str] = {}  # model id -> real id
        self.held: list[Held] = []
        self.stale: list[Held] = []
        self.custom_ids = 0
        self.flow_ids = 0
        self.parents: list[str] = []  # model ids of the flow parents added

    # ----------------------------------------------------------------- plumbing
    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def both(self, call: Any) -> tuple[Any, Any]:
        """Run ``call(backend, is_real)`` on both; errors must match by class."""
        outcomes: list[Any] = []
        for backend, is_real in ((self.model, False), (self.real, True)):
            try:
                outcomes.append(self.run(call(backend, is_real)))
            except LaneError as exc:
                outcomes.append(type(exc))
        model_result, real_result = outcomes
        if isinstance(model_result, type) or isinstance(real_result, type):
            assert model_result == real_result, (model_result, real_result)
        return model_result, real_result

    def real_id(self, model_id: str) -> str:
        return self.ids.get(model_id, model_id)

    def remember(self, model_jobs: list[JobRow], real_jobs: list[JobRow]) -> None:
        assert len(model_jobs) == len(real_jobs)
        for model_job, real_job in zip(model_jobs, real_jobs, strict=True):
            self.ids.setdefault(model_job.id, real_job.id)
            assert self.ids[model_job.id] == real_job.id
            self.same_job(model_job, real_job)

    def same_job(self, model_job: JobRow, real_job: JobRow) -> None:
        for field in fields(JobRow):
            if field.name in _UNCOMPARED:
                continue
            assert getattr(model_job, field.name) == getattr(real_job, field.name), (
                field.name,
                model_job,
                real_job,
            )
        assert self.real_id(model_job.id) == real_job.id
        assert (model_job.lock_token is None) == (real_job.lock_token is None)
        assert (
            None if model_job.parent_id is None else self.real_id(model_job.parent_id)
        ) == real_job.parent_id
        for name in ("failed_reason", "deferred_failure"):
            assert self.mapped_reason(getattr(model_job, name)) == getattr(real_job, name), name
        assert len(model_job.stacktrace) == len(real_job.stacktrace)

    def mapped_reason(self, reason: str | None) -> str | None:
        """A model reason with the child ids it names mapped: a flow policy's, and the
        grandchild's nested in it when a failure went up a tree ("child 5 of queue q
        failed: child 7 of queue q failed: boom")."""
        match = None if reason is None else _CHILD_REASON.match(reason)
        if reason is None or match is None:
            return reason
        rest = self.mapped_reason(reason[match.end() :])
        return f"child {self.real_id(match[1])} of queue {match[2]} failed: {rest}"

    # ----------------------------------------------------------------- rules
    @rule(
        priority=st.integers(0, 3),
        lifo=st.booleans(),
        delay_s=st.sampled_from([0, 0, 1, 3]),
        attempts=st.integers(1, 3),
        backoff=st.sampled_from(
            [
                None,
                Backoff.fixed(0),
                Backoff.fixed(1),
                Backoff.fixed(2),
                Backoff.exponential(1, cap=3),
                Backoff.sequence([2, 0, 1]),
            ]
        ),
        custom=st.booleans(),
        data=st.integers(0, 9),
    )
    def add(
        self,
        priority: int,
        lifo: bool,
        delay_s: int,
        attempts: int,
        backoff: Backoff | None,
        custom: bool,
        data: int,
    ) -> None:
        if custom:
            # Reuse a custom id half the time: ADD-3 idempotency.
            self.custom_ids += data % 2 == 0
            job_id = f"c{self.custom_ids}"
        options = JobOptions(
            job_id=job_id if custom else None,
            priority=priority,
            lifo=lifo,
            delay=delay_s,
            attempts=attempts,
            backoff=backoff,  # no jitter: its draw differs between backends
        )
        model_job, real_job = self.both(
            lambda backend, _: backend.add_job(
                self.queue, "task", {"n": data}, options, now=self.now
            )
        )
        self.remember([model_job], [real_job])

    @rule(
        dedup_id=st.sampled_from(["a", "b"]),
        ttl_s=st.sampled_from([None, 1, 3]),
        extend=st.booleans(),
        replace=st.booleans(),
        keep_last=st.booleans(),
        delay_s=st.sampled_from([0, 0, 2]),
        data=st.integers(0, 9),
        bulk=st.booleans(),
    )
    def add_deduplicated(
        self,
        dedup_id: str,
        ttl_s: int | None,
        extend: bool,
        replace: bool,
        keep_last: bool,
        delay_s: int,
        data: int,
        bulk: bool,
    ) -> None:
        """DEDUP-1..10, -20: every mode, alone or twice in one bulk add."""
        dedup = DeduplicationOptions(
            dedup_id,
            ttl=ttl_s,
            extend_ttl=extend and ttl_s is not None,
            replace_delayed=replace,
            keep_last_if_active=keep_last,
        )
        options = JobOptions(deduplication=dedup, delay=delay_s)
        if bulk:
            specs = [JobSpec("dedup", data, options), JobSpec("dedup", data + 1, options)]
            model_jobs, real_jobs = self.both(
                lambda backend, _: backend.add_jobs(self.queue, specs, now=self.now)
            )
            self.remember(model_jobs, real_jobs)
            return
        model_job, real_job = self.both(
            lambda backend, _: backend.add_job(self.queue, "dedup", data, options, now=self.now)
        )
        self.remember([model_job], [real_job])

    @rule(
        key=st.sampled_from(["r1", "r2"]),
        every_s=st.sampled_from([1, 3]),
        limit=st.sampled_from([None, 2]),
        upsert=st.booleans(),
    )
    def add_repeat(self, key: str, every_s: int, limit: int | None, upsert: bool) -> None:
        """REP-2..8: series started, duplicated or replaced; their successors appear at
        completion (learned by ``learn_ids``)."""
        options = JobOptions(repeat=RepeatOptions.every(every_s, limit=limit, key=key))
        model_job, real_job = self.both(
            lambda backend, _: (backend.upsert_repeat if upsert else backend.add_job)(
                self.queue, "tick", None, options, now=self.now
            )
        )
        if not isinstance(model_job, type):
            self.remember([model_job], [real_job])

    @rule(
        children=st.lists(
            st.tuples(
                st.sampled_from(_POLICIES),
                st.integers(1, 2),
                st.sampled_from([None, "new", "reuse"]),
                st.booleans(),
                st.sampled_from(_FLOW_DEDUP),
            ),
            min_size=1,
            max_size=3,
        ),
        parent=st.sampled_from([None, "new", "reuse"]),
        parent_delay_s=st.sampled_from([0, 0, 2]),
        parent_dedup=st.sampled_from(_FLOW_DEDUP),
    )
    def add_flow(
        self,
        children: list[tuple[str | None, int, str | None, bool, str | None]],
        parent: str | None,
        parent_delay_s: int,
        parent_dedup: str | None = None,
    ) -> None:
        """FLOW-1..13: trees of one or two levels, every policy, custom ids new or met
        again (an existing parent takes children; an existing child is attached, counts
        at once when completed, or conflicts with another parent). DEDUP-17..19: a node
        may carry a keep-last deduplication id that add_deduplicated's jobs share: skipped
        for a waiting owner, kept (its parent holding a placeholder) for a running one."""

        def custom(kind: str | None) -> str | None:
            if kind is None:
                return None
            self.flow_ids += kind == "new" or self.flow_ids == 0
            return f"f{self.flow_ids}"

        nodes = []
        for policy, attempts, kind, grandchild, dedup_id in children:
            options: dict[str, Any] = {"attempts": attempts}
            if policy is not None:
                options[policy] = True
            if dedup_id is not None:
                options["deduplication"] = {"id": dedup_id, "keep_last_if_active": True}
            job_id = custom(kind)
            if job_id is not None:
                options["job_id"] = job_id
            nodes.append(
                FlowJob(
                    "child", attempts, options, children=[FlowJob("leaf")] if grandchild else []
                )
            )
        parent_options: dict[str, Any] = {"delay_ms": parent_delay_s * 1000}
        if parent_dedup is not None:
            parent_options["deduplication"] = {"id": parent_dedup, "keep_last_if_active": True}
        parent_id = custom(parent)
        if parent_id is not None:
            parent_options["job_id"] = parent_id
        tree = FlowJob("parent", None, parent_options, queue=self.queue, children=nodes)
        model_flow, real_flow = self.both(lambda backend, _: backend.add_flow(tree, now=self.now))
        if isinstance(model_flow, type):
            return

        def flatten(flow: Flow) -> list[JobRow]:
            return [flow.job, *(job for child in flow.children for job in flatten(child))]

        self.remember(flatten(model_flow), flatten(real_flow))
        for flow in (model_flow, *model_flow.children):
            if flow.children and flow.job.id not in self.parents:
                self.parents.append(flow.job.id)
        if model_flow.job.id not in self.parents:
            self.parents.append(model_flow.job.id)

    @precondition(precondition_named(lambda self: self.parents))
    @rule(index=st.integers(0, 20))
    def remove_unprocessed_children(self, index: int) -> None:
        model_id = self.parents[index % len(self.parents)]
        model_removed, real_removed = self.both(
            lambda backend, is_real: backend.remove_unprocessed_children(
                self.queue, self.real_id(model_id) if is_real else model_id, now=self.now
            )
        )
        if not isinstance(model_removed, type):
            assert [self.real_id(j.id) for j in model_removed] == [j.id for j in real_removed]

    @precondition(precondition_named(lambda self: self.ids))
    @rule(index=st.integers(0, 50))
    def remove_child_dependency(self, index: int) -> None:
        model_id = sorted(self.ids)[index % len(self.ids)]
        model_done, real_done = self.both(
            lambda backend, is_real: backend.remove_child_dependency(
                self.queue, self.real_id(model_id) if is_real else model_id, now=self.now
            )
        )
        assert model_done == real_done

    @rule(count=st.integers(1, 4), priority=st.integers(0, 2))
    def add_bulk(self, count: int, priority: int) -> None:
        specs = [JobSpec("bulk", n, JobOptions(priority=priority)) for n in range(count)]
        model_jobs, real_jobs = self.both(
            lambda backend, _: backend.add_jobs(self.queue, specs, now=self.now)
        )
        self.remember(model_jobs, real_jobs)

    @rule(
        limit=st.integers(1, 3),
        lease_s=st.sampled_from([2, 5]),
        local=st.sampled_from([None, None, JobRateLimit(2, 3)]),
        total=st.sampled_from([None, None, 1]),
        ignore_pause=st.sampled_from([False, False, True]),
    )
    def claim(
        self,
        limit: int,
        lease_s: int,
        local: JobRateLimit | None,
        total: int | None = None,
        ignore_pause: bool = False,
    ) -> None:
        """CLAIM-*: ``total`` caps the claim over its demands; PAUSE-10: a worker that
        ignores pauses claims from a paused queue."""
        model_jobs, real_jobs = self.both(
            lambda backend, _: backend.claim_jobs(
                "worker",
                [QueueDemand(self.queue, limit)],
                lease_s,
                total=total,
                now=self.now,
                rate_limit=local,
                ignore_pause=ignore_pause,
            )
        )
        self.remember(model_jobs, real_jobs)
        for model_job, real_job in zip(model_jobs, real_jobs, strict=True):
            self.held.append(Held(model_job.id, model_job.lock_token, real_job.lock_token))

    @rule(
        outcomes=st.lists(
            st.sampled_from(["complete", "complete", "fail", "discard"]), min_size=1, max_size=3
        ),
        value=st.integers(0, 3),
    )
    def work(self, outcomes: list[str], value: int) -> None:
        """A worker's turn: claim, then settle each job claimed at once, so runs end far
        more often than the separate claim and settle rules alone make them."""
        before = len(self.held)
        self.claim(len(outcomes), 5, None)
        for held, outcome in zip(self.held[before:], outcomes, strict=False):
            if outcome == "complete":
                self.complete_held(held, value)
            else:
                self.fail_held(held, discard=outcome == "discard")

    def target(self, index: int, states: tuple[JobState, ...]) -> str:
        """A model id, mostly of a job in one of ``states`` when the model has one (a rule
        drawn on any job would mostly meet a refusal), else of any job."""
        page = self.run(self.model.list_jobs(self.queue, list(states), limit=1000))
        pool = sorted(job.id for job in page.items if job.id in self.ids)
        if not pool or index % 4 == 0:  # now and then any job: the refusals are compared too
            pool = sorted(self.ids)
        return pool[index % len(pool)]

    def pick(self, index: int, stale: bool) -> Held | None:
        pool = self.stale if (stale and self.stale) or not self.held else self.held
        return pool[index % len(pool)] if pool else None

    def release_hold(self, held: Held) -> None:
        if held in self.held:
            self.held.remove(held)
            self.stale.append(held)

    @precondition(precondition_named(lambda self: self.held or self.stale))
    @rule(index=st.integers(0, 20), stale=st.booleans(), value=st.integers(0, 3))
    def complete(self, index: int, stale: bool, value: int) -> None:
        held = self.pick(index, stale)
        assert held is not None
        self.complete_held(held, value)

    def complete_held(self, held: Held, value: int) -> None:
        model_out, real_out = self.both(
            lambda backend, is_real: backend.complete_jobs(
                [
                    Completion(
                        self.queue,
                        self.real_id(held.model_id) if is_real else held.model_id,
                        held.real_token if is_real else held.model_token,
                        {"value": value},
                    )
                ],
                now=self.now,
            )
        )
        assert [(o.status, o.state) for o in model_out] == [(o.status, o.state) for o in real_out]
        self.release_hold(held)

    @precondition(precondition_named(lambda self: self.held or self.stale))
    @rule(index=st.integers(0, 20), stale=st.booleans(), discard=st.booleans())
    def fail(self, index: int, stale: bool, discard: bool) -> None:
        held = self.pick(index, stale)
        assert held is not None
        self.fail_held(held, discard)

    def fail_held(self, held: Held, discard: bool) -> None:
        model_out, real_out = self.both(
            lambda backend, is_real: backend.fail_jobs(
                [
                    Failure(
                        self.queue,
                        self.real_id(held.model_id) if is_real else held.model_id,
                        held.real_token if is_real else held.model_token,
                        "boom",
                        stacktrace="Traceback: boom",
                        discard_retry=discard,
                    )
                ],
                now=self.now,
            )
        )
        assert [(o.status, o.state) for o in model_out] == [(o.status, o.state) for o in real_out]
        self.release_hold(held)

    @precondition(precondition_named(lambda self: self.held or self.stale))
    @rule(index=st.integers(0, 20), stale=st.booleans())
    def release(self, index: int, stale: bool) -> None:
        held = self.pick(index, stale)
        assert held is not None
        model_job, real_job = self.both(
            lambda backend, is_real: backend.release_job(
                self.queue,
                self.real_id(held.model_id) if is_real else held.model_id,
                held.real_token if is_real else held.model_token,
                now=self.now,
            )
        )
        if not isinstance(model_job, type):
            self.same_job(model_job, real_job)
        self.release_hold(held)

    def on_hold(self, held: Held, call: Any) -> tuple[Any, Any]:
        """``call(backend, job_id, token)`` on both with the hold's id and token; the hold
        is given up (a second use is a stale writer's)."""
        outcome = self.both(
            lambda backend, is_real: call(
                backend,
                self.real_id(held.model_id) if is_real else held.model_id,
                held.real_token if is_real else held.model_token,
            )
        )
        self.release_hold(held)
        return outcome

    @precondition(precondition_named(lambda self: self.held or self.stale))
    @rule(
        index=st.integers(0, 20),
        stale=st.booleans(),
        delay_s=st.sampled_from([0, 1, 3]),
        give_back=st.booleans(),
    )
    def delay(self, index: int, stale: bool, delay_s: int, give_back: bool) -> None:
        """MGMT-6: a run moves its job to delayed; A2/A14: or hands it back untried."""
        held = self.pick(index, stale)
        assert held is not None
        model_job, real_job = self.on_hold(
            held,
            lambda backend, job_id, token: (
                backend.give_back_job if give_back else backend.delay_job
            )(self.queue, job_id, token, delay_s, now=self.now),
        )
        if not isinstance(model_job, type):
            self.same_job(model_job, real_job)

    @precondition(precondition_named(lambda self: self.held or self.stale))
    @rule(index=st.integers(0, 20), stale=st.booleans())
    def discard(self, index: int, stale: bool) -> None:
        """MW-2: a run deletes its job without a failed record."""
        held = self.pick(index, stale)
        assert held is not None
        self.on_hold(
            held,
            lambda backend, job_id, token: backend.discard_job(
                self.queue, job_id, token, now=self.now
            ),
        )

    @precondition(precondition_named(lambda self: self.ids))
    @rule(
        index=st.integers(0, 50),
        fenced=st.booleans(),
        value=st.integers(0, 3),
        keep=st.sampled_from([None, 1, 2]),
    )
    def progress_and_log(self, index: int, fenced: bool, value: int, keep: int | None) -> None:
        """MGMT-11/13: progress (an event) and a log line, from an administrator or from
        a run (fenced by its token: a stale run's are refused)."""
        held = self.pick(index, stale=index % 2 == 0) if fenced else None
        model_id = held.model_id if held else sorted(self.ids)[index % len(self.ids)]

        def token(is_real: bool) -> str | None:
            return None if held is None else held.real_token if is_real else held.model_token

        model_job, real_job = self.both(
            lambda backend, is_real: backend.update_job_progress(
                self.queue,
                self.real_id(model_id) if is_real else model_id,
                {"value": value},
                now=self.now,
                token=token(is_real),
            )
        )
        if not isinstance(model_job, type):
            self.same_job(model_job, real_job)
        model_kept, real_kept = self.both(
            lambda backend, is_real: backend.add_job_log(
                self.queue,
                self.real_id(model_id) if is_real else model_id,
                f"line {value}",
                keep=keep,
                now=self.now,
                token=token(is_real),
            )
        )
        assert model_kept == real_kept
        model_logs, real_logs = self.both(
            lambda backend, is_real: backend.get_job_logs(
                self.queue, self.real_id(model_id) if is_real else model_id
            )
        )
        assert model_logs == real_logs

    @rule(
        dedup_id=st.sampled_from(["a", "b"]),
        token=st.sampled_from(["t1", "t2"]),
        window_s=st.sampled_from([1, 3]),
        max_wait_s=st.sampled_from([None, None, 2, 5]),
        data=st.integers(0, 9),
    )
    def debounce(
        self, dedup_id: str, token: str, window_s: int, max_wait_s: int | None, data: int
    ) -> None:
        """UNIQ-9..11: a debounced dispatch on the ids the other modes use: the window's
        delayed job replaced, one no longer waiting superseded, a burst flushed after its
        max wait."""
        options: dict[str, Any] = {
            "delay_ms": window_s * 1000,
            "deduplication": {"id": dedup_id, "replace_delayed": True, "token": token},
        }
        model_add, real_add = self.both(
            lambda backend, _: backend.add_debounced_job(
                self.queue, "debounced", data, options, max_wait=max_wait_s, now=self.now
            )
        )
        if isinstance(model_add, type):
            return
        self.remember([model_add.job], [real_add.job])
        replaced = model_add.replaced_id
        assert (None if replaced is None else self.real_id(replaced)) == real_add.replaced_id

    @rule(
        dedup_id=st.sampled_from(["a", "b"]),
        token=st.sampled_from(["t1", "t2"]),
        reservation_only=st.booleans(),
    )
    def release_token(self, dedup_id: str, token: str, reservation_only: bool) -> None:
        """UNIQ-7: an id freed only while its owner carries the caller's token."""
        model_freed, real_freed = self.both(
            lambda backend, _: backend.release_deduplication_key(
                self.queue, dedup_id, token, reservation_only=reservation_only
            )
        )
        assert model_freed == real_freed

    @rule(dedup_id=st.sampled_from(["a", "b"]))
    def remove_deduplication_key(self, dedup_id: str) -> None:
        """DEDUP-14: the id freed, its owner untouched."""
        model_had, real_had = self.both(
            lambda backend, _: backend.remove_deduplication_key(self.queue, dedup_id)
        )
        assert model_had == real_had

    @rule(key=st.sampled_from(["r1", "r2"]))
    def remove_repeat(self, key: str) -> None:
        """REP-10: the series ends and its owner goes (not while it runs)."""
        model_id, real_id = self.both(
            lambda backend, _: backend.remove_repeat(self.queue, key, now=self.now)
        )
        assert (None if model_id is None else self.real_id(model_id)) == real_id

    @rule(limit=st.integers(1, 5))
    def read_views(self, limit: int) -> None:
        """The narrower reads a dashboard and the facade make, each against the model:
        waiting jobs per priority, ready and scheduled jobs (counted and listed)."""
        for read in (
            lambda backend, _: backend.get_counts_per_priority(self.queue, [0, 1, 2, 3, 7]),
            lambda backend, _: backend.count_ready_jobs(self.queue, now=self.now),
            lambda backend, _: backend.count_scheduled_jobs(self.queue, now=self.now),
            lambda backend, _: backend.count_pending_jobs(self.queue),
            lambda backend, _: backend.get_queue_stats(self.queue),
        ):
            model_answer, real_answer = self.both(read)
            assert model_answer == real_answer
        for listing in (
            lambda backend, _: backend.list_ready_jobs(self.queue, limit=limit, now=self.now),
            lambda backend, _: backend.list_scheduled_jobs(self.queue, limit=limit, now=self.now),
        ):
            model_page, real_page = self.both(listing)
            assert model_page.total == real_page.total
            assert [self.real_id(j.id) for j in model_page.items] == [j.id for j in real_page.items]

    @rule(lease_s=st.sampled_from([2, 5]))
    def renew(self, lease_s: int) -> None:
        holds = self.held + self.stale[-2:]
        model_failed, real_failed = self.both(
            lambda backend, is_real: backend.renew_leases(
                [
                    LeaseRef(
                        self.queue,
                        self.real_id(h.model_id) if is_real else h.model_id,
                        h.real_token if is_real else h.model_token,
                    )
                    for h in holds
                ],
                lease_s,
                now=self.now,
            )
        )
        assert [self.real_id(ref.id) for ref in model_failed] == [ref.id for ref in real_failed]

    @rule(seconds=st.sampled_from([1, 2, 3, 6]))
    def tick(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule(limit=st.integers(1, 2), max_stalled=st.integers(0, 2), late_s=st.sampled_from([0, 3]))
    def crash(self, limit: int, max_stalled: int, late_s: int) -> None:
        """STALL-*: a worker claims and dies; its lease runs out (or not yet, ``late_s``
        0) before the next recovery. Its holds stay, to be used late (a lost lease can
        change nothing)."""
        self.claim(limit, 2, None)
        self.tick(late_s)
        self.recover_stalled(max_stalled)

    @rule(max_stalled=st.integers(0, 2))
    def recover_stalled(self, max_stalled: int) -> None:
        model_out, real_out = self.both(
            lambda backend, _: backend.recover_stalled(
                [self.queue], max_stalled_count=max_stalled, now=self.now
            )
        )
        assert [(self.real_id(o.id), o.state) for o in model_out] == [
            (o.id, o.state) for o in real_out
        ]

    @rule()
    def promote_due(self) -> None:
        model_count, real_count = self.both(
            lambda backend, _: backend.promote_due_jobs([self.queue], now=self.now)
        )
        assert model_count == real_count

    # Paused a quarter of the draws: a queue paused half the time left claims empty.
    @rule(pause=st.sampled_from([True, False, False, False]))
    def pause_or_resume(self, pause: bool) -> None:
        self.both(
            lambda backend, _: (
                backend.pause_queue(self.queue) if pause else backend.resume_queue(self.queue)
            )
        )

    @precondition(precondition_named(lambda self: self.ids))
    @rule(index=st.integers(0, 50))
    def retry(self, index: int) -> None:
        model_id = self.target(index, ("completed", "failed"))
        model_job, real_job = self.both(
            lambda backend, is_real: backend.retry_job(
                self.queue, self.real_id(model_id) if is_real else model_id, now=self.now
            )
        )
        if not isinstance(model_job, type):
            self.same_job(model_job, real_job)

    @precondition(precondition_named(lambda self: self.ids))
    @rule(index=st.integers(0, 50))
    def remove(self, index: int) -> None:
        model_id = sorted(self.ids)[index % len(self.ids)]
        model_removed, real_removed = self.both(
            lambda backend, is_real: backend.remove_job(
                self.queue, self.real_id(model_id) if is_real else model_id, now=self.now
            )
        )
        assert model_removed == real_removed

    @precondition(precondition_named(lambda self: self.ids))
    @rule(index=st.integers(0, 50))
    def promote(self, index: int) -> None:
        """MGMT-3: a delayed job waits now (a conflict in any other state)."""
        model_id = self.target(index, ("delayed",))
        model_job, real_job = self.both(
            lambda backend, is_real: backend.promote_job(
                self.queue, self.real_id(model_id) if is_real else model_id, now=self.now
            )
        )
        if not isinstance(model_job, type):
            self.same_job(model_job, real_job)

    @precondition(precondition_named(lambda self: self.ids))
    @rule(index=st.integers(0, 50), delay_s=st.sampled_from([0, 1, 4]))
    def reschedule(self, index: int, delay_s: int) -> None:
        """MGMT-5: a delayed job due again at now + delay."""
        model_id = self.target(index, ("delayed",))
        model_job, real_job = self.both(
            lambda backend, is_real: backend.reschedule_job(
                self.queue,
                self.real_id(model_id) if is_real else model_id,
                delay_s,
                now=self.now,
            )
        )
        if not isinstance(model_job, type):
            self.same_job(model_job, real_job)

    @precondition(precondition_named(lambda self: self.ids))
    @rule(
        index=st.integers(0, 50),
        priority=st.integers(0, 3),
        lifo=st.sampled_from([None, False, True]),
    )
    def update_priority(self, index: int, priority: int, lifo: bool | None) -> None:
        """MGMT-9: a waiting job takes its new place in the claim order (the claims that
        follow show it); other states only store the priority."""
        model_id = self.target(index, ("waiting",))
        model_job, real_job = self.both(
            lambda backend, is_real: backend.update_job_priority(
                self.queue,
                self.real_id(model_id) if is_real else model_id,
                priority,
                lifo=lifo,
                now=self.now,
            )
        )
        if not isinstance(model_job, type):
            self.same_job(model_job, real_job)

    @rule(
        keep_completed=st.sampled_from([None, 0, 1, 2, 5]),
        keep_failed=st.sampled_from([None, 0, 1, 3]),
    )
    def set_queue_retention(self, keep_completed: int | None, keep_failed: int | None) -> None:
        self.both(
            lambda backend, _: backend.set_queue_retention(
                self.queue, keep_completed=keep_completed, keep_failed=keep_failed
            )
        )

    @rule(record=st.booleans())
    def set_queue_events(self, record: bool) -> None:
        # While off, every transition skips its events on both backends (same_events).
        self.both(lambda backend, _: backend.set_queue_events(self.queue, record=record))
        model_record, real_record = self.both(
            lambda backend, _: backend.get_queue_events(self.queue)
        )
        assert model_record == real_record == record

    @rule(
        rate=st.sampled_from([None, None, JobRateLimit(1, 2), JobRateLimit(3, 4)]),
        max_active=st.sampled_from([None, None, 1, 2]),
    )
    def set_claim_limits(self, rate: JobRateLimit | None, max_active: int | None) -> None:
        # RATE-2/7: the claims after this follow the limits on both backends (same jobs).
        async def apply(backend: Any, _: bool) -> None:
            if rate is None:
                await backend.clear_claim_rate_limit(self.queue)
            else:
                await backend.set_claim_rate_limit(self.queue, rate)
            if max_active is None:
                await backend.clear_max_active_jobs(self.queue)
            else:
                await backend.set_max_active_jobs(self.queue, max_active)

        self.both(apply)

    @rule(how=st.sampled_from(["clear", "obliterate", "force"]))
    def empty_queue(self, how: str) -> None:
        """A16: clear what is still to run (never a validly leased job); MGMT-21:
        obliterate everything, or stay paused while a job runs unless forced. One rule,
        so emptying the queue is drawn as often as any one other change."""
        model_count, real_count = self.both(
            lambda backend, _: (
                backend.clear_queues([self.queue], now=self.now)
                if how == "clear"
                else backend.obliterate_queue(self.queue, force=how == "force", now=self.now)
            )
        )
        assert model_count == real_count

    @rule(batch=st.integers(1, 3))
    def prune_finished(self, batch: int) -> None:
        # Completions at the same self.now tie on finished_at: the invariants check that
        # both backends break the tie the same way (creation order).
        model_count, real_count = self.both(
            lambda backend, _: backend.prune_finished([self.queue], batch=batch)
        )
        assert model_count == real_count

    @rule(delayed=st.booleans())
    def drain(self, delayed: bool) -> None:
        model_count, real_count = self.both(
            lambda backend, _: backend.drain_jobs(self.queue, delayed=delayed, now=self.now)
        )
        assert model_count == real_count

    @rule(
        state=st.sampled_from(["completed", "failed", "active", "waiting", "delayed"]),
        grace_s=st.sampled_from([0, 2, 5]),
        limit=st.sampled_from([0, 1, 2]),
    )
    def clean(self, state: JobState, grace_s: int, limit: int) -> None:
        model_jobs, real_jobs = self.both(
            lambda backend, _: backend.clean_jobs(
                self.queue, state, grace_s, limit=limit, now=self.now
            )
        )
        assert len(model_jobs) == len(real_jobs)
        for model_job, real_job in zip(model_jobs, real_jobs, strict=True):
            self.same_job(model_job, real_job)

    # ----------------------------------------------------------------- invariants
    @invariant()
    def observed_alike(self) -> None:
        """Everything a user can observe, after every step: one invariant that reads the
        jobs once (six invariants each read them again: four ``list_jobs`` per step, ~40 %
        of the test's time), then the six comparisons, in the order Hypothesis ran them as
        invariants (by name)."""
        model_page, real_page = self.pages()
        self.same_events()
        self.same_flows()
        self.same_jobs_and_counts(model_page, real_page)
        self.same_limiter()
        self.same_metrics()
        self.same_owners_and_series()

    def same_limiter(self) -> None:
        model_ttl, real_ttl = self.both(
            lambda backend, _: backend.get_claim_rate_limit_ttl(self.queue, now=self.now)
        )
        assert model_ttl == real_ttl
        model_maxed, real_maxed = self.both(lambda backend, _: backend.is_maxed(self.queue))
        assert model_maxed == real_maxed

    def learn_ids(self, model_jobs: list[JobRow], real_jobs: list[JobRow]) -> None:
        """Jobs no call returned (a kept duplicate or a repeat successor, stored by a
        finalisation) pair up in creation order: both backends create them in the same
        order, and generated ids grow with it."""
        known = set(self.ids.values())
        model_new = sorted(
            (j.id for j in model_jobs if j.id not in self.ids and j.id.isdigit()), key=int
        )
        real_new = sorted(
            (j.id for j in real_jobs if j.id not in known and j.id.isdigit()), key=int
        )
        assert len(model_new) == len(real_new), (model_new, real_new)
        self.ids.update(zip(model_new, real_new, strict=True))

    def pages(self) -> tuple[Any, Any]:
        """Both backends' jobs, with the ids of jobs stored by finalisations learned."""
        model_page, real_page = self.both(
            lambda backend, _: backend.list_jobs(self.queue, list(ALL_STATES), limit=1000)
        )
        self.learn_ids(model_page.items, real_page.items)
        return model_page, real_page

    def same_jobs_and_counts(self, model_page: Any, real_page: Any) -> None:
        assert model_page.total == real_page.total
        real_by_id = {job.id: job for job in real_page.items}
        for model_job in model_page.items:
            real_job = real_by_id[self.real_id(model_job.id)]
            self.same_job(model_job, real_job)
            # STATE-1: a lock exactly while active.
            assert (real_job.state == "active") == (real_job.lock_token is not None)
        model_counts, real_counts = self.both(lambda backend, _: backend.get_job_counts(self.queue))
        assert model_counts == real_counts
        model_paused, real_paused = self.both(
            lambda backend, _: backend.is_queue_paused(self.queue)
        )
        assert model_paused == real_paused

    def same_flows(self) -> None:
        """FLOW-16..23: every parent's counts and buckets, children mapped."""

        def mapped(ref: ChildRef) -> ChildRef:
            return ChildRef(ref.queue, self.real_id(ref.id))

        for model_id in self.parents:
            model_counts, real_counts = self.both(
                lambda backend, is_real, m=model_id: backend.get_flow_dependency_counts(
                    self.queue, self.real_id(m) if is_real else m
                )
            )
            assert model_counts == real_counts, model_id
            model_values, real_values = self.both(
                lambda backend, is_real, m=model_id: backend.get_flow_dependency_values(
                    self.queue, self.real_id(m) if is_real else m
                )
            )
            assert {
                mapped(k): v for k, v in model_values.processed.items()
            } == real_values.processed
            assert [mapped(k) for k in model_values.unprocessed] == real_values.unprocessed
            assert {
                mapped(k): self.mapped_reason(v) for k, v in model_values.ignored.items()
            } == real_values.ignored
            assert [mapped(k) for k in model_values.failed] == real_values.failed

    def same_owners_and_series(self) -> None:
        for dedup_id in ("a", "b"):
            model_owner, real_owner = self.both(
                lambda backend, _, d=dedup_id: backend.get_deduplication_job_id(
                    self.queue, d, now=self.now
                )
            )
            assert (None if model_owner is None else self.real_id(model_owner)) == real_owner
        model_series, real_series = self.both(
            lambda backend, _: backend.list_repeats(self.queue, ascending=True)
        )
        assert [
            (i.key, self.real_id(i.job_id), i.count, i.next_at, i.every_ms, i.limit)
            for i in model_series
        ] == [(i.key, i.job_id, i.count, i.next_at, i.every_ms, i.limit) for i in real_series]

    @rule(data_points=st.sampled_from([1, 2, 20_160]))
    def compact_metrics(self, data_points: int) -> None:
        # Every queue of the database: this machine's answers must not change, and the
        # folded minutes of other queues stay counted (OBS-6).
        self.both(
            lambda backend, _: backend.compact_metrics(max_data_points=data_points, now=self.now)
        )

    def same_metrics(self) -> None:
        """OBS-6: every completion and terminal failure counted alike, minute by minute."""
        for state in ("completed", "failed"):
            model_metrics, real_metrics = self.both(
                lambda backend, _, s=state: backend.get_metrics(self.queue, s)
            )
            assert model_metrics == real_metrics, state

    def same_events(self) -> None:
        model_events, real_events = self.both(
            lambda backend, _: backend.read_events(self.queue, "-", "+", 10_000)
        )
        known = set(self.ids.values())

        def loser(data: dict[str, Any], mapped: bool) -> dict[str, Any]:
            if mapped and isinstance(data.get("failedReason"), str):
                # A parent's failure names the child that failed it (FLOW-5).
                data = {**data, "failedReason": self.mapped_reason(data["failedReason"])}
            # A skipped candidate was never stored: its generated id has no counterpart.
            if "deduplicatedJobId" not in data:
                return data
            loser_id = data["deduplicatedJobId"]
            if mapped:
                loser_id = self.ids.get(loser_id, "?")
            elif loser_id not in known:
                loser_id = "?"
            return {**data, "deduplicatedJobId": loser_id}

        assert [
            (e.event, None if e.job_id is None else self.real_id(e.job_id), loser(e.data, True))
            for e in model_events
        ] == [(e.event, e.job_id, loser(e.data, False)) for e in real_events]


class FlowStateMachine(JobStateMachine):
    """The same model with flows drawn far more often (each rule is drawn about equally
    often): fan-in, every policy and the cuts meet claims, failures, stalls, removals and
    retries of the children and parents."""

    @rule(
        policies=st.lists(st.sampled_from(_POLICIES), min_size=1, max_size=4),
        attempts=st.integers(1, 2),
        nested=st.booleans(),
    )
    def add_plain_flow(self, policies: list[str | None], attempts: int, nested: bool) -> None:
        self.add_flow(
            [
                (policy, attempts, None, nested and n == 0, None)
                for n, policy in enumerate(policies)
            ],
            None,
            0,
        )

    @rule(policy=st.sampled_from(_POLICIES), attempts=st.integers(1, 2))
    def add_flow_of_two(self, policy: str | None, attempts: int) -> None:
        self.add_flow(
            [(policy, attempts, None, False, None), (None, 1, None, False, None)], None, 0
        )

    @precondition(precondition_named(lambda self: self.held or self.stale))
    @rule(index=st.integers(0, 20), stale=st.booleans(), value=st.integers(0, 3))
    def complete_more(self, index: int, stale: bool, value: int) -> None:
        self.complete(index, stale, value)

    @precondition(precondition_named(lambda self: self.held or self.stale))
    @rule(index=st.integers(0, 20), stale=st.booleans(), discard=st.booleans())
    def fail_more(self, index: int, stale: bool, discard: bool) -> None:
        self.fail(index, stale, discard)


def run_machine(machine: type[RuleBasedStateMachine], examples: int, steps: int = 30) -> None:
    """Run ``machine`` for ``examples`` examples of ``steps`` steps (``LANE_PG_STATEFUL_
    EXAMPLES`` scales every machine's count from its default of 40)."""
    scale = int(os.environ.get("LANE_PG_STATEFUL_EXAMPLES", "40")) / 40
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=max(1, round(examples * scale)),
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
