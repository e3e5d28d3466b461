"""Lists written in more than one place, checked equal: error codes, job states, option keys.

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
from lane_pg.options import MAX_PRIORITY, OPTION_KEYS, RETENTION_KEYS, parse_options
from lane_pg.types import ALL_STATES, JobState

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
    """The CHECK constraint on lane.jobs.state, ``lane._check_states`` and
    ``lane._state_rank`` (list order), ``ALL_STATES`` and ``JobState``, the memory
    backend's counts and docs/python.md's States line name the same states in the same order."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        definition = await conn.fetchval(
            "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c"
            " WHERE c.conrelid = 'lane.jobs'::regclass AND c.contype = 'c'"
            " AND pg_get_constraintdef(c.oid) LIKE '%(state %'"
        )
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
    assert typing.get_args(JobState) == ALL_STATES
    assert {row["s"]: row["rank"] for row in ranks} == {
        **{state: rank for rank, state in enumerate(ALL_STATES, start=1)},
        "x": None,
    }
    memory = MemoryBackend()
    await memory.add_job("q", "n")
    assert tuple(await memory.get_job_counts("q")) == ALL_STATES
    assert tuple(_documented_states()) == ALL_STATES


# ------------------------------------------------------------------ option keys


async def test_option_keys_agree_with_check_options(pg_dsn: str) -> None:
    """The keys ``lane._check_options`` has a branch for, the keys its error message
    lists, and ``OPTION_KEYS`` (the Python parser's) are one set; so are the retention
    keys; the priority bound is the lane.jobs CHECK constraint's."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        source = await conn.fetchval(
            "SELECT prosrc FROM pg_proc WHERE proname = '_check_options'"
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
    # The arms of `CASE v_key` (8 spaces in): `WHEN 'delay_ms', 'timeout_ms' THEN`.
    arms = re.findall(r"^ {8}WHEN ('[a-z_]+'(?:, '[a-z_]+')*) THEN$", source, re.MULTILINE)
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
