"""``lane_pg.options.parse_options`` and ``JobOptions.to_json`` (ADD-8), without a database.

The agreement with ``lane._check_options`` is tests/conformance/test_options_agree.py; these
pin what the parser says a document means and how ``JobOptions`` uses it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from lane_pg.errors import InvalidJobId, InvalidOptions, InvalidPayload, InvalidPriority
from lane_pg.options import (
    MAX_COUNT,
    MAX_DURATION_MS,
    OPTION_KEYS,
    JobRetention,
    ParsedOptions,
    jsonb_key_order,
    parse_options,
)
from lane_pg.types import Backoff, JobOptions, options_document, options_json, parse_job_options


def test_a_document_says_what_it_means_ADD_8() -> None:
    document = {
        "job_id": "order-7",
        "priority": 3,
        "lifo": True,
        "delay_ms": 1500,
        "attempts": 4,
        "backoff": {"type": "fixed", "delay_ms": 10},
        "timeout_ms": 0,
        "remove_on_complete": True,
        "remove_on_fail": {"age_ms": 60_000, "limit": 5},
    }
    assert parse_options(document) == ParsedOptions(
        document=document,
        job_id="order-7",
        priority=3,
        lifo=True,
        delay_ms=1500,
        attempts=4,
        backoff={"type": "fixed", "delay_ms": 10},
        timeout_ms=0,
        remove_on_complete=True,
        remove_on_fail=JobRetention(age_ms=60_000, limit=5),
    )


@pytest.mark.parametrize(
    ("value", "rule"),
    [(False, None), (None, None), (0, JobRetention(count=0)), ({}, JobRetention())],
)
def test_retention_values_ADD_8(value: object, rule: object) -> None:
    """false and null keep the job (no rule); a count of 0 deletes all but none kept."""
    assert parse_options({"remove_on_complete": value}).remove_on_complete == rule


def test_nulls_are_not_given_even_for_unknown_keys_ADD_8() -> None:
    """SQL skips a null before it looks at the key: ``{"bogus": null}`` is accepted."""
    assert parse_options({"bogus": None, "priority": None}).priority == 0
    with pytest.raises(InvalidOptions, match="unknown option 'bogus'"):
        parse_options({"bogus": 0})


def test_keys_are_checked_in_jsonb_order_ADD_8() -> None:
    """Shorter keys first, then bytewise: the first bad one is reported, as in SQL."""
    assert list(OPTION_KEYS) == sorted(OPTION_KEYS, key=jsonb_key_order)
    assert OPTION_KEYS[:5] == ("lifo", "meta", "job_id", "repeat", "backoff")
    with pytest.raises(InvalidJobId):
        parse_options({"attempts": 0, "job_id": "0"})
    with pytest.raises(InvalidOptions, match="delay_ms"):
        parse_options({"priority": True, "delay_ms": True})


def test_python_bools_are_not_integers_ADD_8() -> None:
    for document, error in (
        ({"priority": True}, InvalidPriority),
        ({"attempts": True}, InvalidOptions),
        ({"delay_ms": False}, InvalidOptions),
        ({"backoff": {"type": "fixed", "delay_ms": True}}, InvalidOptions),
        ({"backoff": {"type": "exponential", "base_ms": 1, "jitter": True}}, InvalidOptions),
        ({"remove_on_fail": {"count": True}}, InvalidOptions),
    ):
        with pytest.raises(error):
            parse_options(document)


def test_bounds_ADD_8() -> None:
    assert parse_options({"attempts": MAX_COUNT, "delay_ms": MAX_DURATION_MS}).attempts == MAX_COUNT
    for document in (
        {"attempts": MAX_COUNT + 1},
        {"timeout_ms": MAX_DURATION_MS + 1},
        {"backoff": {"type": "sequence", "delays_ms": [MAX_DURATION_MS + 1]}},
        {"remove_on_complete": MAX_COUNT + 1},
        {"remove_on_complete": {"age_ms": MAX_DURATION_MS + 1}},
    ):
        with pytest.raises(InvalidOptions):
            parse_options(document)


def test_a_backoff_needs_the_delays_of_its_type_ADD_8() -> None:
    """The memory backend used to read ``"1"`` as ``[1]`` and ``True`` as 1 ms."""
    for backoff in (
        {},
        {"type": "fixed"},
        {"type": "exponential", "cap_ms": 5},
        {"type": "sequence", "delays_ms": "1"},
        {"type": "sequence", "delays_ms": []},
        {"type": "exponential", "base_ms": 1, "jitter": None},
        {"type": "exponential", "base_ms": 1, "jitter": "0.5"},
    ):
        with pytest.raises(InvalidOptions, match="invalid backoff"):
            parse_options({"backoff": backoff})


def test_job_options_are_checked_by_the_same_rules_ADD_8() -> None:
    """``to_json`` runs ``parse_options`` before leaving defaults out: a wrong type is
    refused, not dropped or coerced (``lifo="yes"`` used to become ``true``)."""
    for options, error in (
        (JobOptions(lifo="yes"), InvalidOptions),  # type: ignore[arg-type]
        (JobOptions(priority=False), InvalidPriority),
        (JobOptions(attempts=MAX_COUNT + 1), InvalidOptions),
        (JobOptions(delay=timedelta(milliseconds=MAX_DURATION_MS + 1)), InvalidOptions),
        (JobOptions(remove_on_complete=MAX_COUNT + 1), InvalidOptions),
        (JobOptions(remove_on_fail=JobRetention(count=-1)), InvalidOptions),
        (JobOptions(backoff=Backoff("fixed", delay_ms=-1)), InvalidOptions),
        (JobOptions(job_id="42"), InvalidJobId),
    ):
        with pytest.raises(error):
            options.to_json()
    assert JobOptions(priority=0, lifo=False, delay=0, attempts=1).to_json() == {}
    assert JobOptions(timeout=0, remove_on_complete=False).to_json() == {
        "timeout_ms": 0,
        "remove_on_complete": False,
    }


def test_documents_are_parsed_as_jsonb_receives_them_ADD_8() -> None:
    """Tuples become arrays; a dict goes to SQL unchecked, a JobOptions is checked."""
    parsed = parse_job_options({"backoff": {"type": "sequence", "delays_ms": (1, 2)}})
    assert parsed.document == {"backoff": {"type": "sequence", "delays_ms": [1, 2]}}
    assert options_json({"priority": -1}) == '{"priority":-1}'  # SQL judges it
    assert options_document({"bogus": 1}) == {"bogus": 1}
    with pytest.raises(InvalidPriority):
        parse_job_options({"priority": -1})
    with pytest.raises(InvalidOptions):
        options_json([("priority", 1)])  # type: ignore[arg-type]
    with pytest.raises(InvalidPayload):
        parse_job_options({"job_id": "nul\x00"})


def test_retention_builders_RET_2() -> None:
    assert JobRetention.newest(3) == JobRetention(count=3)
    assert JobRetention.age(60).to_json() == {"age_ms": 60_000}
    assert JobRetention.age(timedelta(minutes=1)) == JobRetention(age_ms=60_000)
    assert JobRetention.age_and_count(1.5, 10).with_limit(2) == JobRetention(1500, 10, 2)
    with pytest.raises(InvalidOptions):
        JobRetention.age(-1)
