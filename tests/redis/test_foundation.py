"""The ground of the Redis backend, on a real Redis: scripts loaded from their files with
their includes, called by SHA and reloaded after the server forgot them, JSON both ways,
the server's clock, one hash tag per queue, and the start-up checks that refuse a server
which could evict queue keys."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis
from redis.crc import key_slot

from lane_pg.errors import ConfigurationError
from lane_pg.redis.keys import QueueKeys, validate_prefix
from lane_pg.redis.scripts import LUA, Scripts, expand, load_script, shake
from lane_pg.redis.server import (
    MIN_VERSION,
    ServerFacts,
    check_server,
    open_client,
    parse_version,
    refusal,
)

TEST_LUA = Path(__file__).parent / "lua"


# ---------------------------------------------------------------------- includes


def test_includes_are_expanded_once_each_in_place(tmp_path: Path) -> None:
    (tmp_path / "a.lua").write_text("-- @include b\nlocal a = 1\n")
    (tmp_path / "b.lua").write_text("local b = 2\n")
    text = expand("-- @include a\n-- @include b\n-- @include a\nreturn 0\n", tmp_path)
    assert text.count("local a = 1") == 1 and text.count("local b = 2") == 1
    assert text.index("local b = 2") < text.index("local a = 1")  # a's include comes first
    assert text.rstrip().endswith("return 0")


def test_an_include_cycle_or_a_missing_include_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.lua").write_text("-- @include b\n")
    (tmp_path / "b.lua").write_text("-- @include a\n")
    with pytest.raises(ConfigurationError, match="cycle: main -> a -> b -> a"):
        expand("-- @include a\n", tmp_path, ("main",))
    with pytest.raises(ConfigurationError, match="'nope' not found"):
        expand("-- @include nope\n", tmp_path)
    with pytest.raises(ConfigurationError, match="no Lua script 'missing'"):
        load_script("missing")


def test_every_shipped_script_loads_with_its_includes() -> None:
    for path in sorted(LUA.glob("*.lua")):
        script = load_script(path.stem)
        assert "@include" not in script.source.replace("-- (included above", "")
        assert len(script.sha) == 40


async def test_every_shipped_script_compiles_on_the_server(redis_client: Redis) -> None:
    """SCRIPT LOAD compiles a script: a Lua syntax error in any file or include fails
    here, not in the first call that happens to need it."""
    for path in sorted(LUA.glob("*.lua")):
        script = load_script(path.stem)
        assert await redis_client.script_load(script.source) == script.sha, path.name


# ------------------------------------------------------------------------- calls


async def test_json_travels_both_ways_with_its_types(redis_client: Redis, prefix: str) -> None:
    scripts = Scripts(redis_client, TEST_LUA)
    keys = QueueKeys("q", prefix)
    value = {"n": 42, "f": 1.5, "t": True, "s": "ünïcode ✓", "list": [1, "2", None], "o": {}}
    result = await scripts.call("echo", [keys.waiting, keys.meta], value)
    assert result["args"] == {**value, "list": [1, "2", None]}
    assert result["keys"] == [keys.waiting, keys.meta]


async def test_a_flushed_script_cache_costs_one_reload_not_a_failure(
    redis_client: Redis, prefix: str
) -> None:
    scripts = Scripts(redis_client, TEST_LUA)
    await scripts.call("echo", [QueueKeys("q", prefix).meta], {"a": 1})
    loaded = scripts.loads  # 0 when the shared server knew the script already
    assert loaded <= 1
    await scripts.call("echo", [QueueKeys("q", prefix).meta], {"a": 2})
    assert scripts.loads == loaded  # by SHA, no load
    await redis_client.script_flush()  # as a restart or a failover would
    result = await scripts.call("echo", [QueueKeys("q", prefix).meta], {"a": 3})
    assert result["args"] == {"a": 3} and scripts.loads == loaded + 1


async def test_scripts_act_at_the_servers_time_unless_given_one(redis_client: Redis) -> None:
    scripts = Scripts(redis_client)
    before = time.time() * 1000
    now = (await scripts.call("server_time", [], {}))["now"]
    seconds, micros = await redis_client.time()
    assert abs(now - (seconds * 1000 + micros // 1000)) < 1000
    assert abs(now - before) < 5000  # the same machine here: the clocks agree
    assert (await scripts.call("server_time", [], {"now": 1234567}))["now"] == 1234567


# -------------------------------------------------------------------------- keys


def test_every_key_of_a_queue_is_in_one_slot_and_queues_differ() -> None:
    keys = QueueKeys("emails", "lane")
    names = [keys.meta, keys.waiting, keys.delayed, keys.active, keys.events, keys.marker]
    assert {key_slot(k.encode()) for k in [*names, keys.job("17")]} == {key_slot(b"{lane:emails}")}
    assert keys.tag == "{lane:emails}" and keys.job("17") == "{lane:emails}:job:17"
    assert QueueKeys("billing", "lane").tag != keys.tag


@pytest.mark.parametrize("bad", ["", "a{b", "x}", "has space", "-lead", "p" * 65])
def test_a_prefix_that_would_move_the_hash_tag_is_refused(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid Redis key prefix"):
        validate_prefix(bad)


# ------------------------------------------------------------------------ server


def test_the_refusals_say_what_to_change() -> None:
    ok = ServerFacts((7, 0, 15), "noeviction", False)
    assert refusal(ok) is None
    old = refusal(ServerFacts((6, 0, 9), "noeviction", False))
    assert old is not None and "6.0.9 is too old" in old and "6.2" in old
    lru = refusal(ServerFacts((7, 2), "allkeys-lru", True))
    assert lru is not None and "'allkeys-lru'" in lru and "noeviction" in lru
    assert parse_version("7.0.15") == (7, 0, 15) and MIN_VERSION <= (7, 0, 15)
    with pytest.raises(ConfigurationError, match="cannot read the Redis version"):
        parse_version("seven")


async def test_the_test_server_passes_the_checks(redis_client: Redis) -> None:
    facts = await check_server(redis_client)
    assert facts.maxmemory_policy == "noeviction" and facts.version >= MIN_VERSION


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server to start")
async def test_a_server_that_may_evict_keys_is_refused_at_connect(tmp_path: Path) -> None:
    port = _free_port()
    server = await asyncio.create_subprocess_exec(
        "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", str(tmp_path), "--maxmemory-policy", "allkeys-lru",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"redis://127.0.0.1:{port}/0"
        for _ in range(100):  # until it accepts connections
            try:
                probe = await open_client(url, connect_timeout=0.5, check=False)
            except (OSError, ConnectionError, Exception):
                await asyncio.sleep(0.05)
                continue
            await probe.aclose()
            break
        with pytest.raises(ConfigurationError, match="maxmemory-policy is 'allkeys-lru'"):
            await open_client(url)
    finally:
        server.terminate()
        await server.wait()


async def test_an_unreachable_server_fails_fast() -> None:
    port = _free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(Exception, match="onnect"):
        await open_client(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5)
    assert time.monotonic() - started < 5


# ---------------------------------------------------------------- the waiting index

PRIORITIES = st.integers(0, 2_097_152)
MODES = st.sampled_from(["fifo", "lifo", "front"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=st.lists(
        st.tuples(PRIORITIES | st.sampled_from([0, 1, 5]), MODES, st.integers(1, 2**40 - 1)),
        min_size=1,
        max_size=25,
    )
)
async def test_the_waiting_index_orders_as_postgresql_orders_waiting_jobs(
    redis_client: Redis, prefix: str, pg_dsn: str, entries: list[tuple[int, str, int]]
) -> None:
    """The members of includes/order.lua, read BYLEX, in the order PostgreSQL's claim reads
    (lane._order_key, the front at offset 0, then the key), for random priorities, modes
    and sequence numbers (ties included)."""
    import asyncpg

    rows = [
        {"priority": p, "mode": m, "seq": s, "key": n + 1, "id": f"j{n + 1}"}
        for n, (p, m, s) in enumerate(entries)
    ]
    conn = await asyncpg.connect(pg_dsn)
    try:
        expected = [
            row["id"]
            for row in await conn.fetch(
                "SELECT e.id FROM jsonb_to_recordset($1::jsonb)"
                " AS e(priority int, mode text, seq bigint, key bigint, id text)"
                " ORDER BY CASE WHEN e.mode = 'front' THEN e.priority::bigint * 2199023255552"
                "          ELSE lane._order_key(e.priority, e.mode = 'lifo', e.seq) END, e.key",
                json.dumps(rows),
            )
        ]
    finally:
        await conn.close()
    key = QueueKeys(f"q{uuid.uuid4().hex[:8]}", prefix).waiting
    result = await Scripts(redis_client, TEST_LUA).call("order_probe", [key], {"entries": rows})
    assert result["ids"] == expected
    await redis_client.delete(key)


def test_a_script_keeps_only_the_functions_its_code_reaches() -> None:
    source = (
        "local function lane_a(x)\n  return lane_b(x)\nend\n\n"
        "local function lane_b(x)\n  return x\nend\n\n"
        "local function lane_unused()\n  return lane_only_here()\nend\n\n"
        "local function lane_only_here()\n  return 1\nend\n\n"
        "local function lane_loop()\n  return lane_loop()\nend\n\n"
        "-- lane_noted is named by this comment only, and kept\n"
        "local function lane_noted()\nend\n\n"
        "return lane_a(1)\n"
    )
    kept = re.findall(r"^local function (\w+)\(", shake(source), re.M)
    assert kept == ["lane_a", "lane_b", "lane_noted"]
