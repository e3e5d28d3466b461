"""What a new user met on the command line: fallbacks said out loud, a warning for a queue
name nothing used before, a closed pipe, units in every ``--help``, durations everywhere
(the older spellings kept), readable times, clear messages. Real processes, real database."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from lane_pg.cli import COMMANDS, build_parser, main
from lane_pg.postgres.backend import PostgresBackend
from tests.test_cli_queue_commands import (
    REPO,
    cli,
    cli_environment,
    is_paused,
    run_cli,
    unique_queue,
)

NEW_QUEUE = "has no jobs and no workers yet"


# --------------------------------------------------------------------------- --help
def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: sub.choices[name] for name in COMMANDS}


# An option takes a time when its name says so (a timeout, an interval, an age, a lease, a
# rate over a window); its help must then say the unit and the default.
TIME_OPTION = re.compile(r"timeout|interval|lease|older|before|hours|grace|rate|delay|age")
UNIT = re.compile(r"\b\d+(?:\.\d+)?(?:ms|s|m|h|d)\b|seconds|milliseconds|hours|DURATION")
DEFAULT = re.compile(r"default|\(\d[^)]*\)|\bnone\b")


def test_every_option_that_takes_a_time_states_its_unit_and_default() -> None:
    checked = []
    for name, parser in _subparsers().items():
        for action in parser._actions:
            options = " ".join(action.option_strings)
            if not options or not TIME_OPTION.search(options) or action.nargs == 0:
                continue
            text = f"{action.metavar or ''} {action.help or ''}"
            assert UNIT.search(text), f"{name} {options}: no unit in {text!r}"
            assert DEFAULT.search(action.help or ""), f"{name} {options}: no default stated"
            checked.append(f"{name} {options}")
    # The walk found the options it is about (a renamed option must not escape it).
    assert any("--poll-interval" in c for c in checked)
    assert any(c.startswith("flush --older-than") for c in checked)
    assert any(c.startswith("failed --older-than") for c in checked)
    assert any(c.startswith("clean --older-than") for c in checked)


def test_every_help_prints_its_usage_line_once() -> None:
    for name in ("flow", "repeats"):
        done = run_cli(name, "--help")
        assert done.returncode == 0, done.stderr
        usage = done.stdout.split("\n\n", 1)[0]
        assert usage.count("remove") == 1, usage


def test_a_command_parses_alike_by_its_name_its_alias_and_after_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run builds the parser of the command it names only; options before the command
    and an alias (which the whole parser resolves) still reach the same command."""
    usages = []
    for argv in (["stats", "--help"], ["-v", "--log-format", "json", "stats", "--help"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 0
        usages.append(capsys.readouterr().out.splitlines()[0])
    assert (
        usages[0]
        == usages[1]
        == "usage: python -m lane_pg stats [-h] [--queue NAME] [--json] [--dsn DSN]"
    )
    with pytest.raises(SystemExit):
        main(["--log-format", "yaml", "stats"])
    assert capsys.readouterr().err.count("invalid choice: 'yaml'") == 1
    for alias, name in (("work", "worker"), ("continue", "resume")):
        with pytest.raises(SystemExit) as exited:
            main([alias, "--help"])
        assert exited.value.code == 0
        help_text = capsys.readouterr().out
        assert help_text.startswith(f"usage: python -m lane_pg {name} ")
        assert _module_help(name) in " ".join(help_text.split())


def _module_help(command: str) -> str:
    module = importlib.import_module(f"lane_pg.cli.{command}")
    return " ".join(str(module.HELP).split())


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["--poll-interval", "500"], "poll_interval", 500.0),  # the older spelling: ms
        (["--poll-interval", "2s"], "poll_interval", 2000.0),
        (["--poll-interval", "250ms"], "poll_interval", 250.0),
        (["--block-timeout", "1.5"], "block_timeout", 1.5),  # the older spelling: seconds
        (["--block-timeout", "500ms"], "block_timeout", 0.5),
        (["--shutdown-timeout", "2m"], "shutdown_timeout", 120.0),
        (["--shutdown-timeout", "45"], "shutdown_timeout", 45.0),
    ],
)
def test_worker_times_take_durations_and_their_older_bare_numbers(
    argv: list[str], dest: str, value: float
) -> None:
    args = build_parser().parse_args(["worker", *argv])
    assert getattr(args, dest) == value


def test_a_bad_duration_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["worker", "--poll-interval", "soon"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--poll-interval" in err and "500ms, 30s" in err and "milliseconds" in err


# --------------------------------------------------------------------------- new queues
async def test_pause_limits_and_retention_warn_on_a_new_queue_name_and_still_act(
    pg_dsn: str, pg_backend: PostgresBackend
) -> None:
    backend = pg_backend
    typo = unique_queue("emial")
    paused = await cli("pause", typo, dsn=pg_dsn)
    assert paused.returncode == 0, paused.stderr
    assert paused.stderr == (
        f"lane_pg: queue '{typo}' {NEW_QUEUE}: paused ahead of time; check the name\n"
    )
    assert await is_paused(pg_dsn, typo)  # pausing ahead of time is legitimate

    fresh = unique_queue("limits")
    limited = await cli("limits", fresh, "--max-active", "3", dsn=pg_dsn)
    assert limited.returncode == 0, limited.stderr
    assert f"queue '{fresh}' {NEW_QUEUE}: limits set ahead of time" in limited.stderr
    assert await backend.get_max_active_jobs(fresh) == 3
    again = await cli("limits", fresh, "--max-active", "4", dsn=pg_dsn)
    assert again.returncode == 0 and again.stderr == ""

    other = unique_queue("keep")
    kept = await cli("retention", other, "--keep-completed", "5", dsn=pg_dsn)
    assert kept.returncode == 0, kept.stderr
    assert f"queue '{other}' {NEW_QUEUE}: retention set ahead of time" in kept.stderr
    assert (await backend.get_queue_retention(other)).keep_completed == 5

    # A queue that had a job is known: no warning.
    used = unique_queue("used")
    await backend.add_job(used, "work", None)
    quiet = await cli("pause", used, dsn=pg_dsn)
    assert quiet.returncode == 0 and quiet.stderr == ""


# --------------------------------------------------------------------------- fallbacks
async def test_an_unknown_driver_names_the_memory_fallback_on_the_first_line() -> None:
    done = await cli("pause", "somewhere", extra_env={"LANE_PG_DRIVER": "postgress"})
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert "LANE_PG_DRIVER='postgress'" in first
    assert "memory driver" in first and "lost when it exits" in first
    refused = await cli(
        "pause",
        "somewhere",
        extra_env={"LANE_PG_DRIVER": "postgress", "LANE_PG_ENV": "production"},
    )
    assert refused.returncode == 2
    assert "LANE_PG_ENV=production" in refused.stderr


# --------------------------------------------------------------------------- pipes
def test_a_closed_stdout_exits_quietly(pg_dsn: str) -> None:
    """``stats | head -1``: the reader is gone before the command writes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lane_pg", "stats"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        env=cli_environment(pg_dsn),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    code = proc.wait(timeout=60)
    assert err == ""
    assert code == 1


# --------------------------------------------------------------------------- papercuts
async def test_restart_prints_a_readable_time(pg_dsn: str) -> None:
    done = await cli("restart", dsn=pg_dsn)
    assert done.returncode == 0, done.stderr
    found = re.search(r"stored at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC", done.stdout)
    assert found, done.stdout
    stored = datetime.fromisoformat(found.group(1)).replace(tzinfo=UTC)
    assert abs(stored - datetime.now(UTC)) < timedelta(hours=1)


async def test_app_spec_errors_say_whether_the_attribute_exists() -> None:
    missing = await cli("worker", "--app", "tests.worker.apps:ap", "--burst")
    assert missing.returncode == 1
    assert "module 'tests.worker.apps' has no 'ap'" in missing.stderr
    wrong = await cli("worker", "--app", "tests.worker.apps:asyncio", "--burst")
    assert wrong.returncode == 1
    assert "'asyncio' is a module, not a lane_pg.App" in wrong.stderr


async def test_flush_takes_a_duration_and_keeps_hours(pg_dsn: str) -> None:
    for argv, shown in (
        (["--older-than", "400d"], "older than 400d"),
        (["--before", "36h"], "older than 36h"),
        (["--hours", "48"], "older than 2d"),
    ):
        done = await cli("flush", *argv, dsn=pg_dsn)
        assert done.returncode == 0, done.stderr
        assert done.stdout.rstrip().endswith(shown), done.stdout
    bad = await cli("flush", "--older-than", "soon", dsn=pg_dsn)
    assert bad.returncode == 1 and "--older-than 'soon'" in bad.stderr


def _keyword_dsn(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    words = [f"host={parts.hostname}", f"dbname={parts.path.lstrip('/')}"]
    if parts.port:
        words.append(f"port={parts.port}")
    if parts.username:
        words.append(f"user={parts.username}")
    if parts.password:
        words.append(f"password={parts.password}")
    return " ".join(words)


async def test_a_libpq_keyword_dsn_is_accepted(pg_dsn: str) -> None:
    keywords = _keyword_dsn(pg_dsn)
    migrated = await cli("migrate", "--dsn", keywords)
    assert migrated.returncode == 0, migrated.stderr
    assert "already at version" in migrated.stdout
    stats = await cli("stats", "--queue", "nothing_here", extra_env={"LANE_PG_DSN": keywords})
    assert stats.returncode == 0, stats.stderr
    bad = await cli("stats", "--dsn", "host=x nonsense=1")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "invalid DSN" in bad.stderr
