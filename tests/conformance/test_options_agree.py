"""The memory backend's options parser against PostgreSQL's ``lane._check_options`` (ADD-8).

Hypothesis feeds the same random options document to ``MemoryBackend.add_job`` (which runs
``lane_pg.options.parse_options``) and to ``PostgresBackend.add_job`` (which sends a dict
document to the stored function unchecked): valid and invalid documents, values out of
range, unknown keys, wrong types, nulls, nested backoff and retention objects, huge numbers
and Python's bools where integers are expected. Both must accept or refuse it alike, with
the same error class; an accepted document must mean the same to both (priority, lifo,
state and delay, attempts, timeout, backoff, the options as stored).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidJobId, InvalidOptions, InvalidPriority, LaneError
from lane_pg.memory import MemoryBackend
from lane_pg.options import (
    DEDUPLICATION_KEYS,
    FLOW_POLICY_FLAGS,
    MAX_COUNT,
    MAX_DURATION_MS,
    MAX_JOB_ID_LENGTH,
    MAX_PRIORITY,
    OPTION_KEYS,
    RETENTION_KEYS,
)
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobRow

RUN = uuid.uuid4().hex[:8]
"""Unique ids are one lock per connection (UNIQ-1): each run, and each case, its own."""
NOW = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)

# Integers at and around every bound the rules know, and far beyond them.
_EDGES = sorted(
    {
        *(0, 1, 2, -1, 2**63 - 1, 2**63, -(2**63), 10**30),
        *(MAX_PRIORITY, MAX_PRIORITY + 1, MAX_COUNT, MAX_COUNT + 1),
        *(MAX_DURATION_MS, MAX_DURATION_MS + 1),
    }
)
integers = st.one_of(st.sampled_from(_EDGES), st.integers(-5, 5000), st.integers(-(2**70), 2**70))
# Floats that read back from jsonb as the same Python value (a float of 1e16 or more is
# written "1e+16" and comes back an int: a JSON detail, not an options rule), plus huge
# ones where they can only be refused.
plain_floats = st.floats(-1e15, 1e15, allow_nan=False)
floats = st.one_of(plain_floats, st.sampled_from([0.0, -0.0, 0.5, 1.0, 1.5, 1e16, 1e300]))
scalars = st.one_of(st.none(), st.booleans(), integers, floats, st.text(max_size=6))
junk = st.recursive(
    st.one_of(st.none(), st.booleans(), integers, plain_floats, st.text(max_size=6)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
# Anything a key may be given instead of what it expects: wrong types, Python bools for
# integers, values beyond every bound, nested objects and arrays; half the time one of the
# values that sit right at a rule's edge.
near_misses = st.sampled_from(
    [None, True, False, -1, 0, 1.0, 1.5, "1", [], {}, MAX_COUNT + 1, MAX_DURATION_MS + 1]
)
anything = st.one_of(near_misses, integers, scalars, junk)


def _bounded(low: int, high: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(low, high), st.sampled_from([low, high]))


durations = _bounded(0, MAX_DURATION_MS)
valid_backoffs = st.one_of(
    st.fixed_dictionaries({"type": st.just("fixed"), "delay_ms": durations}),
    st.fixed_dictionaries(
        {"type": st.just("exponential"), "base_ms": durations},
        optional={"cap_ms": st.none() | durations, "jitter": st.floats(0, 1) | st.just(1)},
    ),
    st.fixed_dictionaries(
        {"type": st.just("sequence"), "delays_ms": st.lists(durations, min_size=1, max_size=3)}
    ),
)
valid_retentions = st.one_of(
    st.booleans(),
    _bounded(0, MAX_COUNT),
    st.fixed_dictionaries(
        {},
        optional={
            "age_ms": st.none() | durations,
            "count": st.none() | _bounded(0, MAX_COUNT),
            "limit": st.none() | _bounded(0, MAX_COUNT),
        },
    ),
)
valid_deduplications = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=8)},
    optional={
        "ttl_ms": st.none() | _bounded(1, MAX_DURATION_MS),
        "replace_delayed": st.none() | st.booleans(),
        "keep_last_if_active": st.none() | st.booleans(),
    },
).flatmap(
    # extend_ttl only where a TTL is given: without one it is refused (see FAULTY).
    lambda doc: st.fixed_dictionaries(
        {key: st.just(value) for key, value in doc.items()},
        optional={"extend_ttl": st.booleans()} if doc.get("ttl_ms") is not None else {},
    )
)
valid_repeats = st.one_of(
    st.fixed_dictionaries(
        {"every_ms": _bounded(1, MAX_DURATION_MS)},
        optional={"limit": st.none() | _bounded(1, MAX_COUNT), "key": st.text(min_size=1)},
    ),
    st.fixed_dictionaries(
        {
            "pattern": st.sampled_from(
                ["* * * * *", "0 0 2 * * * *", "*/5 * * * * *", "0 9 * * MON"]
            )
        },
        optional={
            "tz": st.sampled_from(["UTC", "Europe/Berlin", None]),
            "end_at": st.sampled_from([None, 0, 4_102_444_800_000]),  # 1970, 2100
        },
    ),
)
VALID: dict[str, st.SearchStrategy[Any]] = {
    "job_id": st.text(min_size=0, max_size=11).map(lambda text: f"j{text}"),
    "priority": _bounded(0, MAX_PRIORITY),
    "lifo": st.booleans(),
    "delay_ms": durations,
    "timeout_ms": durations,
    "attempts": _bounded(1, MAX_COUNT),
    "backoff": valid_backoffs,
    "remove_on_complete": valid_retentions,
    "remove_on_fail": valid_retentions,
    "deduplication": valid_deduplications,
    "repeat": valid_repeats,
    **dict.fromkeys(FLOW_POLICY_FLAGS, st.booleans()),
    "fail_on_timeout": st.booleans(),
    "meta": st.dictionaries(st.text(max_size=4), junk, max_size=3),
}
assert set(VALID) == set(OPTION_KEYS)
UNKNOWN_KEYS = ["bogus", "Priority", "delay", "", "é", "jobid", "zz"]
JOB_IDS = ["0", "0:x", "00", "42", "4 2", "x" * MAX_JOB_ID_LENGTH, "y" * 256, ""]


@st.composite
def _faulty_object(draw: st.DrawFn, valid: st.SearchStrategy[Any], keys: list[str]) -> Any:
    """A valid backoff or retention value with one part replaced, removed or added."""
    value = draw(valid)
    if not isinstance(value, dict):
        return draw(anything)
    part = draw(st.sampled_from([*keys, *value]))
    if part in value and draw(st.booleans()):
        return {key: item for key, item in value.items() if key != part}
    return {**value, part: draw(anything)}


FAULTY: dict[str, st.SearchStrategy[Any]] = {
    "job_id": st.one_of(st.sampled_from(JOB_IDS), st.text(max_size=4), anything),
    "backoff": st.one_of(
        _faulty_object(valid_backoffs, ["type", "delay_ms", "base_ms", "cap_ms", "jitter"]),
        _faulty_object(valid_backoffs, ["delays_ms", "extra"]),
        anything,
    ),
    "remove_on_complete": st.one_of(
        _faulty_object(valid_retentions, [*RETENTION_KEYS, "age"]), anything
    ),
    "remove_on_fail": st.one_of(
        _faulty_object(valid_retentions, [*RETENTION_KEYS, "Count"]), anything
    ),
    "repeat": st.one_of(
        _faulty_object(valid_repeats, ["every_ms", "pattern", "tz", "limit", "end_at", "key"]),
        st.sampled_from(
            [
                {"every_ms": 0},
                {"pattern": "* * * *"},
                {"pattern": "61 * * * *"},
                {"pattern": "* * * * * * 2030"},
                {"pattern": "* * * * *", "tz": "Mars/Base"},
                {"every_ms": 5, "tz": "UTC"},
                {"every_ms": 5, "pattern": "* * * * *"},
                {"limit": 3},
            ]
        ),
        anything,
    ),
    "deduplication": st.one_of(
        _faulty_object(valid_deduplications, [*DEDUPLICATION_KEYS, "ttl"]),
        st.sampled_from(
            [
                {"id": ""},
                {"id": "x" * (MAX_JOB_ID_LENGTH + 1)},
                {"id": "a", "ttl_ms": 0},
                {"id": "a", "extend_ttl": True},
                {"id": "a", "extend_ttl": False},
                {"id": "a", "extend_ttl": True, "ttl_ms": None},
                {"id": 5},
                {"ttl_ms": 5},
            ]
        ),
        anything,
    ),
}


@st.composite
def option_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A valid document of up to four keys, then (most of the time) faults: one key given
    something else, every key given something else (the first bad key in jsonb order is
    the one reported), or a key no backend knows (null or not)."""
    keys = draw(st.lists(st.sampled_from(OPTION_KEYS), unique=True, max_size=4))
    document = {key: draw(VALID[key]) for key in keys}
    mode = draw(st.sampled_from(["valid", "one fault", "one fault", "all faults", "unknown"]))
    if mode == "one fault":
        key = draw(st.sampled_from(keys or OPTION_KEYS))
        document[key] = draw(FAULTY.get(key, anything))
    elif mode == "all faults":
        for key in keys:
            document[key] = draw(FAULTY.get(key, anything))
    elif mode == "unknown":
        document[draw(st.sampled_from(UNKNOWN_KEYS))] = draw(st.none() | junk)
    return document


async def _outcome(
    backend: MemoryBackend | PostgresBackend, queue: str, document: dict[str, Any]
) -> JobRow | type[BaseException]:
    try:
        return await backend.add_job(queue, "n", None, document, now=NOW)
    except Exception as exc:  # compared below; anything but a LaneError fails the test
        return type(exc)


def _meaning(job: JobRow) -> dict[str, Any]:
    return {
        "id": job.id if job.options.get("job_id") is not None else "generated",
        "priority": job.priority,
        "lifo": job.lifo,
        "state": job.state,
        "delay": job.available_at - job.created_at,
        "max_attempts": job.max_attempts,
        "timeout_ms": job.timeout_ms,
        "backoff": job.backoff,
        "options": job.options,
        "deduplication_id": job.deduplication_id,
        "repeat_key": job.repeat_key,
    }


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(document=option_documents())
@example(document={"attempts": 0, "job_id": "0"})  # jsonb order: job_id is checked first
@example(document={"backoff": {"type": "fixed"}})
@example(document={"bogus": None})
@example(document={"remove_on_complete": 10**20})
@example(document={"priority": True, "lifo": 1})
async def test_memory_and_postgres_accept_and_refuse_the_same_options_ADD_8(
    pg_backend: PostgresBackend, document: dict[str, Any]
) -> None:
    queue = f"oa_{uuid.uuid4().hex[:12]}"
    memory = await _outcome(MemoryBackend(), queue, document)
    postgres = await _outcome(pg_backend, queue, document)
    event("accepted" if isinstance(postgres, JobRow) else f"refused: {postgres.__name__}")
    if isinstance(memory, JobRow) and isinstance(postgres, JobRow):
        assert _meaning(memory) == _meaning(postgres), document
        return
    assert memory == postgres, document
    assert isinstance(memory, type) and issubclass(memory, LaneError), memory
    counts = await pg_backend.get_job_counts(queue)
    assert sum(counts.values()) == 0, ("a refused document was written", document)


_FIXED = {"type": "fixed", "delay_ms": 1}
_EXP = {"type": "exponential", "base_ms": 1}
# Each disagreement the Hypothesis test found (or that a bound implies) as one row, run on
# every backend: (document, the error class, or None for accepted).
RULES: list[tuple[dict[str, Any], type[LaneError] | None]] = [
    ({}, None),
    ({"job_id": None, "priority": None, "bogus": None}, None),  # null: not given, any key
    ({"bogus": 1}, InvalidOptions),
    ({"priority": MAX_PRIORITY}, None),
    ({"priority": MAX_PRIORITY + 1}, InvalidPriority),
    ({"priority": True}, InvalidPriority),  # Python's bool is an int, JSON's is not
    ({"priority": 1.0}, InvalidPriority),
    ({"priority": "1"}, InvalidPriority),
    ({"lifo": 1}, InvalidOptions),
    ({"attempts": MAX_COUNT}, None),
    ({"attempts": MAX_COUNT + 1}, InvalidOptions),
    ({"attempts": True}, InvalidOptions),
    ({"delay_ms": MAX_DURATION_MS}, None),
    ({"delay_ms": MAX_DURATION_MS + 1}, InvalidOptions),
    ({"timeout_ms": MAX_DURATION_MS + 1}, InvalidOptions),
    ({"delay_ms": False}, InvalidOptions),
    ({"timeout_ms": 1.0}, InvalidOptions),
    ({"job_id": 7}, InvalidJobId),
    ({"job_id": True}, InvalidJobId),
    ({"job_id": "x" * MAX_JOB_ID_LENGTH}, None),
    ({"job_id": "x" * (MAX_JOB_ID_LENGTH + 1)}, InvalidJobId),
    ({"job_id": "007"}, InvalidJobId),
    ({"backoff": {}}, InvalidOptions),  # SQL accepted these four: its checks were NULL
    ({"backoff": {"type": "fixed"}}, InvalidOptions),
    ({"backoff": {"type": "exponential"}}, InvalidOptions),
    ({"backoff": {"type": "sequence"}}, InvalidOptions),
    ({"backoff": {"type": "sequence", "delays_ms": []}}, InvalidOptions),
    ({"backoff": {"type": "sequence", "delays_ms": [0, MAX_DURATION_MS]}}, None),
    ({"backoff": {"type": "sequence", "delays_ms": [1, MAX_DURATION_MS + 1]}}, InvalidOptions),
    ({"backoff": {"type": "sequence", "delays_ms": [True]}}, InvalidOptions),
    ({"backoff": {**_FIXED, "delay_ms": MAX_DURATION_MS}}, None),
    ({"backoff": {**_FIXED, "delay_ms": MAX_DURATION_MS + 1}}, InvalidOptions),
    ({"backoff": {**_FIXED, "delay_ms": 10**20}}, InvalidOptions),  # broke the retry
    ({"backoff": {**_FIXED, "delay_ms": True}}, InvalidOptions),
    ({"backoff": {**_EXP, "cap_ms": None, "jitter": 1, "extra": "ignored"}}, None),
    ({"backoff": {**_EXP, "cap_ms": MAX_DURATION_MS + 1}}, InvalidOptions),
    ({"backoff": {**_EXP, "jitter": None}}, InvalidOptions),
    ({"backoff": {**_EXP, "jitter": True}}, InvalidOptions),
    ({"backoff": {**_EXP, "jitter": 1.5}}, InvalidOptions),
    ({"backoff": {**_EXP, "jitter": "0.5"}}, InvalidOptions),
    ({"backoff": "fixed"}, InvalidOptions),
    ({"remove_on_complete": MAX_COUNT}, None),
    ({"remove_on_complete": MAX_COUNT + 1}, InvalidOptions),
    ({"remove_on_complete": 10**20}, InvalidOptions),  # broke the completion
    ({"remove_on_complete": 1.0}, InvalidOptions),
    ({"remove_on_fail": {}}, None),
    ({"remove_on_fail": {"age_ms": MAX_DURATION_MS, "count": MAX_COUNT, "limit": None}}, None),
    ({"remove_on_fail": {"age_ms": MAX_DURATION_MS + 1}}, InvalidOptions),
    ({"remove_on_fail": {"count": MAX_COUNT + 1}}, InvalidOptions),
    ({"remove_on_fail": {"limit": True}}, InvalidOptions),
    ({"remove_on_fail": {"age": 1}}, InvalidOptions),
    # DEDUP-1..9: one object, every sub-key checked, and extend_ttl only with a TTL.
    ({"deduplication": {"id": "a"}}, None),
    ({"deduplication": {"id": "x" * MAX_JOB_ID_LENGTH, "ttl_ms": MAX_DURATION_MS}}, None),
    ({"deduplication": {"id": "a", "ttl_ms": 1, "extend_ttl": True}}, None),
    ({"deduplication": {"id": "a", "replace_delayed": None, "keep_last_if_active": True}}, None),
    ({"deduplication": {"id": "a", "extend_ttl": False}}, None),
    ({"deduplication": {"id": "a", "extend_ttl": True}}, InvalidOptions),
    ({"deduplication": {"id": "a", "ttl_ms": 0}}, InvalidOptions),
    ({"deduplication": {"id": "a", "ttl_ms": MAX_DURATION_MS + 1}}, InvalidOptions),
    ({"deduplication": {"id": ""}}, InvalidOptions),
    ({"deduplication": {"id": "x" * (MAX_JOB_ID_LENGTH + 1)}}, InvalidOptions),
    ({"deduplication": {"id": None}}, InvalidOptions),
    ({"deduplication": {"id": "a", "ttl": 5}}, InvalidOptions),
    ({"deduplication": {"id": "a", "keep_last_if_active": 1}}, InvalidOptions),
    ({"deduplication": "a"}, InvalidOptions),
    # UNIQ-1, UNIQ-15: kind 'unique' is a TTL lock that never replaces or keeps duplicates.
    (
        {"deduplication": {"id": f"u1-{RUN}", "ttl_ms": 5, "kind": "unique", "extend_ttl": True}},
        None,
    ),
    ({"deduplication": {"id": "a", "kind": "dedup"}}, None),
    ({"deduplication": {"id": "a", "kind": None}}, None),
    ({"deduplication": {"id": "a", "kind": "unique"}}, InvalidOptions),
    (
        {
            "deduplication": {
                "id": f"u2-{RUN}",
                "ttl_ms": 5,
                "kind": "unique",
                "replace_delayed": True,
            }
        },
        InvalidOptions,
    ),
    (
        {
            "deduplication": {
                "id": f"u3-{RUN}",
                "ttl_ms": 5,
                "kind": "unique",
                "keep_last_if_active": True,
            }
        },
        InvalidOptions,
    ),
    (
        {
            "deduplication": {
                "id": f"u4-{RUN}",
                "ttl_ms": 5,
                "kind": "unique",
                "replace_delayed": False,
            }
        },
        None,
    ),
    ({"deduplication": {"id": "a", "ttl_ms": 5, "kind": "Unique"}}, InvalidOptions),
    ({"deduplication": {"id": "a", "ttl_ms": 5, "kind": True}}, InvalidOptions),
    ({"deduplication": None}, None),
    # REP-1, REP-5, ADD-13: the schedule's own rules are tests/test_schedule.py's.
    ({"repeat": {"every_ms": 1000}}, None),
    ({"repeat": {"pattern": "0 0 2 * * * *", "tz": "Europe/Berlin", "limit": 3}}, None),
    ({"repeat": {"every_ms": 1000}, "delay_ms": 0}, None),
    ({"repeat": {"every_ms": 1000}, "delay_ms": 5}, InvalidOptions),
    ({"repeat": {"every_ms": 1000}, "job_id": "x"}, InvalidOptions),
    ({"repeat": {"every_ms": 1000, "end_at": 0}}, InvalidOptions),  # ended long before NOW
    ({"repeat": {"pattern": "* * * *"}}, InvalidOptions),
    ({"repeat": {"every_ms": 1, "bogus": 1}}, InvalidOptions),
    # The first bad key in jsonb order (shorter first, then bytewise) is reported.
    ({"attempts": 0, "job_id": "0"}, InvalidJobId),
    ({"priority": -1, "lifo": "x"}, InvalidOptions),
    ({"timeout_ms": -1, "priority": -1}, InvalidPriority),
    ({"job_id": "0", "zz": 1}, InvalidOptions),
    ({"remove_on_fail": -1, "priority": -1}, InvalidPriority),
]


@pytest.mark.parametrize(
    ("document", "error"), RULES, ids=[repr(doc).replace(RUN, "<run>") for doc, _ in RULES]
)
async def test_option_rules_ADD_8(
    backend: JobQueueBackend,
    queue_name: str,
    document: dict[str, Any],
    error: type[LaneError] | None,
) -> None:
    """Each rule of ``lane._check_options`` / ``parse_options``, on every backend."""
    if error is not None:
        with pytest.raises(error):
            await backend.add_job(queue_name, "n", None, document, now=NOW)
        assert sum((await backend.get_job_counts(queue_name)).values()) == 0
        return
    job = await backend.add_job(queue_name, "n", None, document, now=NOW)
    assert job.options == document
    delayed = document.get("delay_ms") or "pattern" in document.get("repeat", {})
    assert job.state == ("delayed" if delayed else "waiting")
