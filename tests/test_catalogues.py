"""Lists written in more than one place, checked equal: error codes, job states, option keys,
the named limits.

Each list has one authority (the SQL for codes raised, states and option keys) and copies
that must not drift: ``lane_pg.errors``, ``lane_pg.types``, ``lane_pg.options``, the memory
backend and the user docs (docs/errors.md, docs/python.md). A test here fails the
moment one copy changes alone.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from pathlib import Path

import asyncpg
import pytest

from lane_pg import errors
from lane_pg.errors import SQLSTATE_ERRORS, LaneError
from lane_pg.memory import MemoryBackend
from lane_pg.options import (
    MAX_COUNT,
    MAX_DURATION_MS,
    MAX_PRIORITY,
    OPTION_KEYS,
    RETENTION_KEYS,
    parse_options,
)
from lane_pg.types import ALL_STATES, JobState, schedule

REPO = Path(__file__).resolve().parent.parent
SQL_FILES = sorted(
    [*(REPO / "sql" / "functions").glob("*.sql"), *(REPO / "sql" / "migrations").glob("*.sql")]
)
ERRORS_DOC = (REPO / "docs" / "errors.md").read_text()
PYTHON_DOC = (REPO / "docs" / "python.md").read_text()

_RAISED = re.compile(r"_fail\(\s*'(LN\d{3})'|ERRCODE\s*=\s*'(LN\d{3})'")


def _codes_raised_in_sql() -> dict[str, list[str]]:
    """Each LN code a SQL file raises, with the files raising it."""
    found: dict[str, list[str]] = {}
    for path in SQL_FILES:
        for match in _RAISED.finditer(path.read_text()):
            found.setdefault(match.group(1) or match.group(2), []).append(path.name)
    return found


def _documented_error_rows() -> dict[str, str]:
    """docs/errors.md's table of codes: code -> class name."""
    rows = re.findall(r"^\| (LN\d{3}) \| `(\w+)` \|", ERRORS_DOC, re.MULTILINE)
    codes = [code for code, _ in rows]
    assert len(codes) == len(set(codes)), "a code listed twice in docs/errors.md"
    return dict(rows)


def _error_classes() -> list[type[LaneError]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, LaneError) and cls.__module__ == errors.__name__
    ]


# ------------------------------------------------------------------ LN error codes


def test_every_code_raised_in_sql_is_mapped_and_documented() -> None:
    raised = _codes_raised_in_sql()
    documented = _documented_error_rows()
    assert raised, "no LN code found in sql/: the pattern no longer matches the SQL"
    for code, files in sorted(raised.items()):
        assert code in SQLSTATE_ERRORS, f"{code} (raised in {files}) has no class in errors.py"
        assert code in documented, f"{code} (raised in {files}) is not in docs/errors.md"
        assert documented[code] == SQLSTATE_ERRORS[code].__name__, code


def test_errors_doc_lists_exactly_the_codes_of_errors_py() -> None:
    """Every documented code names the class errors.py gives it, and every class's code
    is documented."""
    documented = _documented_error_rows()
    defined = {cls.sqlstate: cls.__name__ for cls in _error_classes() if "sqlstate" in vars(cls)}
    assert documented == defined


def test_every_error_class_has_its_own_code() -> None:
    """No class reports another's code through the LaneError default (JobTimedOut,
    UnknownJobName and MaxAttemptsExceeded used to say LN000, ValidationError's); a
    subclass that is a kind of its parent (LeaseLost is a LockMismatch) shares its code."""
    owners: dict[str, str] = {}
    for cls in _error_classes():
        if cls is LaneError:
            continue
        if "sqlstate" not in vars(cls):
            parent = cls.__mro__[1]
            assert parent is not LaneError and "sqlstate" in vars(parent), cls
            continue
        assert cls.sqlstate not in owners, (cls.__name__, owners.get(cls.sqlstate))
        owners[cls.sqlstate] = cls.__name__
    assert {"JobTimedOut", "UnknownJobName", "MaxAttemptsExceeded"} <= set(owners.values())
    assert all(SQLSTATE_ERRORS[code].__name__ == owners[code] for code in SQLSTATE_ERRORS)


# ------------------------------------------------------------------ job states


def _documented_states() -> list[str]:
    line = re.search(r"^States: (.+)$", PYTHON_DOC, re.MULTILINE)
    assert line is not None, "docs/python.md has no 'States:' line"
    return re.findall(r"`([^`]+)`", line.group(1))


async def test_job_states_agree_everywhere(pg_dsn: str) -> None:
    """The CHECK constraint on lane.jobs.state, ``lane._job_states()`` (the functions' one
    list, which ``lane._check_states`` and ``lane._state_rank`` use), ``ALL_STATES`` and
    ``JobState``, the memory backend's counts and docs/python.md's States line name the
    same states in the same order."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        definition = await conn.fetchval(
            "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c"
            " WHERE c.conrelid = 'lane.jobs'::regclass AND c.contype = 'c'"
            " AND pg_get_constraintdef(c.oid) LIKE '%(state %'"
        )
        in_functions = await conn.fetchval("SELECT lane._job_states()")
        ranks = await conn.fetch(
            "SELECT s, lane._state_rank(s) AS rank FROM unnest($1::text[]) s", [*ALL_STATES, "x"]
        )
        await conn.execute("SELECT lane._check_states($1)", list(ALL_STATES))
        with pytest.raises(asyncpg.PostgresError) as refused:
            await conn.execute("SELECT lane._check_states(ARRAY['finished'])")
        assert refused.value.sqlstate == "LN003"
    finally:
        await conn.close()
    in_sql = re.findall(r"'([^']+)'::text", definition)
    assert tuple(in_sql) == ALL_STATES
    assert tuple(in_functions) == ALL_STATES
    assert typing.get_args(JobState) == ALL_STATES
    assert {row["s"]: row["rank"] for row in ranks} == {
        **{state: rank for rank, state in enumerate(ALL_STATES, start=1)},
        "x": None,
    }
    memory = MemoryBackend()
    await memory.add_job("q", "n")
    assert tuple(await memory.get_job_counts("q")) == ALL_STATES
    assert tuple(_documented_states()) == ALL_STATES


# ------------------------------------------------------------------ named limits

_LIMITS_SQL = (
    "SELECT lane._max_duration_ms() AS duration_ms, lane._max_priority() AS priority,"
    " lane._max_int() AS int, lane._max_bigint() AS bigint"
)


async def test_python_limits_equal_the_sql_constants(pg_dsn: str) -> None:
    """The Python bounds that must agree with the stored functions' equal their constants
    (00_helpers.sql): what Python accepts, SQL stores."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        limits = await conn.fetchrow(_LIMITS_SQL)
    finally:
        await conn.close()
    assert limits is not None
    assert limits["duration_ms"] == MAX_DURATION_MS
    assert limits["priority"] == MAX_PRIORITY
    assert MAX_COUNT == limits["int"] == schedule.MAX_LIMIT == 2**31 - 1
    assert limits["bigint"] == 2**63 - 1


def test_each_limit_is_written_once_in_the_functions() -> None:
    """The digits of each limit appear in the repeatable SQL only in its constant function;
    everything else calls it (the review counted 28, 7 and 13 copies)."""
    repeatable = [*(REPO / "sql" / "functions").glob("*.sql"), REPO / "sql" / "views.sql"]
    text = "\n".join(path.read_text() for path in repeatable)
    for digits in ("9223372036854", "2097152", "2147483647", "9223372036854775807"):
        assert len(re.findall(rf"\b{digits}\b", text)) == 1, digits


# ------------------------------------------------------------------ option keys


async def test_option_keys_agree_with_check_options(pg_dsn: str) -> None:
    """The keys ``lane._check_option`` (``lane._check_options``' dispatch) has a branch
    for, the keys its error message lists, and ``OPTION_KEYS`` (the Python parser's) are
    one set; so are the retention keys; the priority bound is the lane.jobs CHECK
    constraint's."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        source = await conn.fetchval(
            "SELECT prosrc FROM pg_proc WHERE proname = '_check_option'"
            " AND pronamespace = 'lane'::regnamespace"
        )
        with pytest.raises(asyncpg.PostgresError) as unknown:
            await conn.execute("SELECT lane._check_options('{\"no_such_key\": 1}')")
        retention_accepted = {
            key: await _accepted(conn, {"remove_on_complete": {key: 1}})
            for key in (*RETENTION_KEYS, "age", "counts")
        }
        priority_check = await conn.fetchval(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'lane.jobs'::regclass AND conname = 'jobs_priority_check'"
        )
    finally:
        await conn.close()
    # The arms of its CASE, each calling its rule's checker:
    # `WHEN p_key = 'attempts' THEN` or `WHEN p_key IN ('delay_ms', 'timeout_ms')`.
    arms = re.findall(r"WHEN p_key (?:= '[a-z_]+'|IN \([^)]*\))", source)
    in_branches = {key for arm in arms for key in re.findall(r"'([a-z_]+)'", arm)}
    listed = re.search(r"known options are ([a-z_, ]+)", unknown.value.args[0])
    assert listed is not None, unknown.value
    assert in_branches == set(OPTION_KEYS)
    assert listed.group(1).split(", ") == sorted(OPTION_KEYS)
    assert retention_accepted == {
        **dict.fromkeys(RETENTION_KEYS, True),
        "age": False,
        "counts": False,
    }
    for key in (*RETENTION_KEYS, "age", "counts"):
        document = {"remove_on_complete": {key: 1}}
        try:
            parse_options(document)
        except LaneError:
            assert not retention_accepted[key], key
        else:
            assert retention_accepted[key], key
    assert f"priority <= {MAX_PRIORITY}" in priority_check


async def _accepted(conn: asyncpg.Connection, document: dict[str, object]) -> bool:
    try:
        await conn.execute("SELECT lane._check_options($1::jsonb)", json.dumps(document))
    except asyncpg.PostgresError as exc:
        assert exc.sqlstate == "LN003", exc
        return False
    return True
