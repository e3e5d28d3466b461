"""Fixtures of the conformance suite: every test runs once per backend.

Time never comes from the wall clock inside a test: ``clock`` gives one base instant
(the current UTC time truncated to milliseconds, so PostgreSQL's microsecond timestamps
compare exactly) and every time-dependent call passes ``now=clock.at(offset)``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from tests.helpers import Clock, open_test_redis

BACKENDS = ["memory", "postgres", "redis"]

REDIS_READY: dict[str, dict[str, str]] = {
    "test_add": {
        "test_generated_ids_are_increasing_decimal_strings_ADD_2": "ids count per queue"
        " on Redis (one hash tag, one cluster slot), not across queues",
    },
    "test_claim": {
        "test_renew_leases_returns_failures_and_extends_valid_CLAIM_5_CLAIM_6": "recover_stalled",
        "test_renew_after_expiry_before_recovery_keeps_job_CLAIM_5": "recover_stalled",
    },
    "test_finish": {
        "test_old_token_after_recovery_and_reclaim_FIN_9_CLAIM_4": "recover_stalled",
        "test_old_token_after_recovery_before_reclaim_FIN_9": "recover_stalled",
        "test_stalled_terminal_failure_applies_retention_STALL_3_RET_2": "recover_stalled",
    },
    "test_order": {
        "test_promoted_jobs_take_a_fresh_sequence_ORD_2": "promote_due_jobs",
        "test_due_jobs_promoted_in_available_at_order_ORD_2": "promote_due_jobs",
        "test_stalled_requeue_takes_normal_position_ORD_4_STALL_3": "recover_stalled",
        "test_promoted_lifo_job_is_newest_lifo_ORD_2": "promote_due_jobs",
    },
    "test_retry": {
        "test_attempt_counters_RETRY_5": "recover_stalled",
    },
    "test_give_back": {},
    "test_worker_lifecycle": {},
    "test_worker_modes": {
        "test_the_attempts_guard_runs_in_every_mode_WORK_13_STALL_7": "recover_stalled",
    },
    "test_worker_runtime": {
        "test_lost_lease_is_flagged_and_the_result_not_written_WORK_8_WORK_9": "recover_stalled",
        "test_lost_lease_can_cancel_the_run_when_configured": "recover_stalled",
        "test_a_worker_that_claims_back_its_own_job_tracks_both_runs_WORK_8_CLAIM_4": (
            "recover_stalled"
        ),
    },
    "test_management": {
        "test_promote_due_counts_due_jobs_only_MGMT_4": "promote_due_jobs",
        "test_promote_due_all_queues_MGMT_4": "promote_due_jobs",
        "test_reschedule_keeps_a_repeat_occurrences_options_MGMT_5_REP_14": "repeat",
        "test_retry_resets_stalled_count_MGMT_8": "recover_stalled",
        "test_remove_missing_cleans_the_dedup_owner_left_naming_it_MGMT_16": "deduplication",
    },
    "test_logs": {},
    "test_unknown_jobs": {},
    "test_context_writes": {
        "test_stale_token_writes_are_refused_and_change_nothing_WORK_9_CLAIM_4": "recover_stalled",
        "test_current_token_and_tokenless_admin_writes_work_MGMT_10_MGMT_11_MGMT_13": (
            "recover_stalled"
        ),
        "test_context_of_a_taken_over_run_gets_lease_lost_and_is_marked_lost_WORK_9": (
            "recover_stalled"
        ),
        "test_context_of_the_current_run_writes_with_its_token_WORK_9": "recover_stalled",
    },
    "test_sync_handlers": {},
    "test_pause": {
        "test_delayed_promotion_goes_on_while_paused_PAUSE_12": "promote_due_jobs",
    },
    "test_pause_all": {},
    "test_rate_limits": {},
    "test_queue_events": {
        "test_recording_off_writes_no_events_while_another_queue_records_EVS_4": (
            "update_job_progress, reschedule_job, promote_job, promote_due_jobs, retry_job,"
            " recover_stalled, remove_job"
        ),
        "test_turning_recording_off_keeps_what_was_written_and_on_records_again_EVS_2": (
            "trim_events"
        ),
    },
    "test_worker_support": {
        "test_trim_events_keeps_the_newest_max_events_EVS_3": "trim_events",
    },
    "test_retention_default": {
        "test_prune_keeps_the_newest_keep_completed_RET_1": "prune_finished",
        "test_prune_orders_ties_in_finished_at_by_creation_RET_1": "prune_finished",
        "test_none_keeps_every_finished_job_RET_1": "prune_finished",
        "test_completed_and_failed_bounds_are_independent_RET_1": "prune_finished",
        "test_batch_limits_each_queue_and_state_RET_1": "prune_finished",
        "test_queue_within_its_bound_is_untouched_RET_1": "prune_finished",
        "test_negative_bounds_are_refused_and_change_nothing_RET_1": "prune_finished",
        "test_pruned_jobs_lose_their_logs_RET_1": "prune_finished, add_job_log",
        "test_unfinished_jobs_are_never_pruned_RET_1": "prune_finished",
        "test_pruning_writes_no_events_RET_1_EVS_5": "prune_finished",
        "test_per_job_retention_applies_first_then_the_queue_bound_RET_2_RET_3": ("prune_finished"),
    },
    "test_cleanup": {
        # mixed_queue adds jobs with a deduplication id and two repeat series
        "test_drain_removes_waiting_jobs_only_MGMT_17": "deduplication, repeat, add_job_log",
        "test_drain_with_delayed_keeps_the_repeat_owners_MGMT_17_REP_16": "deduplication,"
        " repeat (get_repeat)",
        "test_clean_keeps_the_repeat_owner_MGMT_20_REP_16": "repeat (count_repeats)",
        "test_clear_queues_empties_them_in_one_call_A16": "deduplication, repeat, add_flow",
        "test_obliterate_refuses_active_jobs_and_stays_paused_MGMT_21": "deduplication,"
        " repeat, is_queue_paused",
        "test_obliterate_forced_deletes_everything_of_the_queue_MGMT_21": "deduplication,"
        " repeat, set_queue_retention, is_queue_paused, list_queues",
        "test_obliterate_without_active_jobs_MGMT_21": "is_queue_paused",
        "test_remove_orphaned_owner_rows_MGMT_22": "deduplication (remove_deduplication_key)",
        "test_job_count_sums_the_counts_MGMT_24": "deduplication, repeat",
        "test_count_pending_jobs_MGMT_25": "deduplication, repeat, add_flow",
        "test_stats_show_the_pause_flag_with_the_counts_PAUSE_13_MGMT_27": "deduplication,"
        " repeat, pause_queue",
        "test_age_retention_is_applied_only_when_a_later_job_finishes_RET_4": "promote_due_jobs",
    },
    "test_reads": {
        "test_state_through_a_lifecycle_STATE_2": "remove_job",
    },
    "test_search_jobs": {
        "test_each_state_in_the_order_of_its_index": "add_flow (tests/redis/test_search.py"
        " checks the other states' order on Redis)",
    },
    "test_events": {
        "test_event_catalogue_scenario_EVS_4": "update_job_progress, recover_stalled,"
        " remove_job, pause_queue",
        "test_refused_calls_write_no_events_EVS_4": "promote_job",
    },
    "test_subscribe_events": {},
    "test_throughput_and_actions": {
        "test_throughput_counts_each_minute_with_wait_and_run_percentiles": "get_throughput",
        "test_throughput_of_a_queue_without_finished_jobs_is_empty": "get_throughput",
        "test_an_action_on_a_missing_or_silent_queue_writes_nothing": "list_queues,"
        " set_queue_events",
    },
    # module: {test: why it does not run on Redis, or the operation it needs that Redis
    # lacks yet}, reviewed; a module not named here does not run on Redis at all.
}
"""Where the Redis backend stands: the conformance modules it runs, each with the tests
it cannot pass yet. The Redis backend is not a URL scheme until this list is whole."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the Redis runs of tests ``REDIS_READY`` does not admit."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend_kind") == "redis":
            module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
            pending = REDIS_READY.get(module)
            name = item.originalname if isinstance(item, pytest.Function) else item.name
            if pending is None or name in pending:
                dropped.append(item)
                continue
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def clock() -> Clock:
    now = datetime.now(UTC)
    return Clock(now.replace(microsecond=now.microsecond // 1000 * 1000))


@pytest.fixture
def queue_b(queue_name: str) -> str:
    """A second fresh queue for multi-queue tests."""
    return f"{queue_name}_b"


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def shared_postgres(backend_kind: str, request: pytest.FixtureRequest) -> JobQueueBackend | None:
    """The session's PostgresBackend for a postgres test, else None (a memory test does
    not need PostgreSQL). A sync fixture: an async one cannot set up another on demand."""
    if backend_kind != "postgres":
        return None
    shared: JobQueueBackend = request.getfixturevalue("pg_backend")
    return shared


@pytest_asyncio.fixture
async def backend(
    shared_postgres: JobQueueBackend | None, backend_kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[JobQueueBackend]:
    """A connected backend of each kind: a fresh MemoryBackend per test, the session's
    shared PostgresBackend (``pg_backend``; tests isolate by queue name and never close
    it), and a RedisBackend under a key prefix of the test's own (its keys deleted after)."""
    if shared_postgres is not None:
        yield shared_postgres
        return
    if backend_kind == "redis":
        async for redis_backend in _redis_backend(request.getfixturevalue("redis_url")):
            yield redis_backend
        return
    from lane_pg.memory import MemoryBackend

    memory = MemoryBackend()
    try:
        yield memory
    finally:
        await memory.close()


async def _redis_backend(url: str) -> AsyncIterator[JobQueueBackend]:
    from lane_pg.redis.backend import RedisBackend

    client = await open_test_redis(url)
    prefix = f"t{uuid.uuid4().hex[:12]}"
    backend = RedisBackend(client, prefix=prefix, owns_client=False)
    try:
        yield backend
    finally:
        async for key in client.scan_iter(match=f"{{{prefix}[:}}]*", count=1000):
            await client.delete(key)
        await client.aclose()
