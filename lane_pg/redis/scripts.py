"""Lua scripts: one file per operation under ``lua/``, loaded once, called by SHA.

A script file may pull in shared code with a line ``-- @include name`` (``lua/includes/
name.lua``); each include is expanded once per script, in place, and an include cycle or
a missing file is refused at load. Arguments travel as one JSON document (``ARGV[1]``)
decoded by Redis's cjson, results as one JSON text, so nested values keep their types
both ways (a Lua table of strings would not).

Calls go through EVALSHA. A server that lost its script cache (a restart, a failover, a
``SCRIPT FLUSH``) answers NOSCRIPT: the script is loaded again and the call made once
more, so a flush costs one round trip, never a failed operation. On a cluster the script
is loaded on the node of the call's first key, the one that answered NOSCRIPT (each master
keeps its own cache), not on every master; during a slot's migration the node that answers
may not be the slot's owner yet, and a second NOSCRIPT loads the script on every master.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from lane_pg.errors import ConfigurationError
from lane_pg.redis.server import RedisClient
from lane_pg.types import JSON

LUA = Path(__file__).parent / "lua"
_ARGUMENTS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""One encoder: ``json.dumps`` with options builds one per call (1.5 us of an add)."""
INCLUDE = re.compile(r"^--\s*@include\s+([A-Za-z0-9_]+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Script:
    """A script with its includes expanded, and its SHA-1 (EVALSHA's key)."""

    name: str
    source: str
    sha: str = field(init=False)
    """Computed once: hashing add_jobs' 40 kB source on every call was 3 % of a
    one-job add's time (py-spy, 8,000 add_job calls)."""

    def __post_init__(self) -> None:
        sha = hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest()
        object.__setattr__(self, "sha", sha)


def expand(
    text: str,
    includes: Path = LUA / "includes",
    chain: tuple[str, ...] = (),
    seen: set[str] | None = None,
) -> str:
    """``text`` with each ``-- @include name`` replaced by ``includes/name.lua`` (itself
    expanded), each include once in the whole script; ``ConfigurationError`` for a cycle
    or a missing file."""
    done: set[str] = set() if seen is None else seen

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in chain:
            raise ConfigurationError(f"Lua include cycle: {' -> '.join((*chain, name))}")
        if name in done:
            return f"-- (included above: {name})"
        done.add(name)
        path = includes / f"{name}.lua"
        if not path.is_file():
            raise ConfigurationError(f"Lua include {name!r} not found ({path})")
        body = expand(path.read_text(encoding="utf-8"), includes, (*chain, name), done)
        return f"-- begin {name}\n{body.rstrip()}\n-- end {name}"

    return INCLUDE.sub(replace, text)


_FUNCTION = re.compile(r"^local function ([A-Za-z_][A-Za-z0-9_]*)\(.*?^end$\n?", re.M | re.S)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shake(source: str) -> str:
    """``source`` without the top-level ``local function``s that no code outside them,
    nor any function kept, names.

    Includes bring whole files: complete_jobs.lua defined 119 functions and called a
    fraction of them. Lua builds every one of them on each call (EVALSHA runs the chunk),
    which was 12.7 us of a 105 us add script (SCRIPT LOAD + EVALSHA timings, 2,000
    calls), and a chunk may hold at most 200 locals. The includes write each top-level
    function from ``local function name(`` at the start of a line to a line ``end``; a
    name that only a comment mentions keeps its function (the check is textual).
    """
    blocks = [(m.group(1), m.start(), m.end()) for m in _FUNCTION.finditer(source)]
    if not blocks:
        return source
    defined = {name for name, _, _ in blocks}
    starts = [start for _, start, _ in blocks]
    uses: dict[str | None, set[str]] = {}  # function (None: code outside all) -> names
    for match in _NAME.finditer(source):
        name = match.group(0)
        if name not in defined:
            continue
        at = bisect.bisect_right(starts, match.start()) - 1
        owner = blocks[at][0] if at >= 0 and match.start() < blocks[at][2] else None
        if owner != name or match.start() != blocks[at][1] + len("local function "):
            uses.setdefault(owner, set()).add(name)
    kept: set[str] = set()
    pending = list(uses.get(None, ()))
    while pending:
        name = pending.pop()
        if name not in kept:
            kept.add(name)
            pending.extend(uses.get(name, ()))
    parts, at = [], 0
    for name, start, end in blocks:
        if name not in kept:
            parts.append(source[at:start])
            at = end
    parts.append(source[at:])
    return "".join(parts)


@functools.cache
def load_script(name: str, directory: Path = LUA) -> Script:
    """Script ``name`` of ``directory``, its includes taken from ``lua/includes``, its
    unused functions left out (``shake``); read once per process."""
    path = directory / f"{name}.lua"
    if not path.is_file():
        raise ConfigurationError(f"no Lua script {name!r} ({path})")
    text = expand(path.read_text(encoding="utf-8"), LUA / "includes", (name,))
    return Script(name, shake(text))


def pack_evalsha(sha: str, keys: Sequence[str], argv: str) -> bytes:
    """``EVALSHA sha len(keys) *keys argv`` in the Redis protocol, UTF-8, as redis-py's
    ``pack_command`` packs it (a test compares the two): its general packer took 3 us of a
    one-job add, this one 0.8 (timeit)."""
    count = str(len(keys)).encode()
    parts = [
        b"*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$%d\r\n%s\r\n"
        % (len(keys) + 4, sha.encode(), len(count), count)
    ]
    for key in keys:
        encoded = key.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(encoded), encoded))
    encoded = argv.encode()
    parts.append(b"$%d\r\n%s\r\n" % (len(encoded), encoded))
    return b"".join(parts)


class Watchdog:
    """The deadline of the calls on held connections: a call running past it is
    cancelled and raises redis-py's ``TimeoutError`` (``expired``), as the connection's
    ``socket_timeout`` would.

    redis-py times a command twice, the send in ``asyncio.wait_for`` (a task of its own)
    and the reply in ``asyncio.timeout``; a one-job add spent 34 us of its 138 us of
    client CPU there (3 x 4,000 adds, process time), and one ``asyncio.timeout`` per call
    still 12 (a cancelled timer stays in the loop's heap until it is due, 5 s of them).
    Here one timer serves every call: it is set when a call starts and none is set, and
    when it fires it cancels the calls past their deadline and is set again for the
    earliest other one."""

    def __init__(self) -> None:
        self._due: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None

    def start(self, limit: float | None) -> asyncio.Task[Any] | None:
        """Watch the current task's call for ``limit`` seconds (None: no deadline)."""
        task = asyncio.current_task()
        if limit is None or task is None:
            return None
        loop = asyncio.get_running_loop()
        due = loop.time() + limit
        self._due[task] = due
        if self._timer is None:
            self._timer = loop.call_at(due, self._fire)
        return task

    def stop(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None:  # the timer stays: when it fires with no call, it is done
            self._due.pop(task, None)

    def expired(self, task: asyncio.Task[Any] | None) -> bool:
        """Whether ``task``'s cancellation was this watchdog's (then it is withdrawn)."""
        if task is None or task not in self._expired:
            return False
        self._expired.discard(task)
        task.uncancel()
        return True

    def _fire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        later = None
        for task, due in list(self._due.items()):
            if due <= now:
                del self._due[task]
                self._expired.add(task)
                task.cancel()
            elif later is None or due < later:
                later = due
        if later is not None:
            self._timer = loop.call_at(later, self._fire)


class Scripts:
    """The scripts of one client, loaded on first use and again after NOSCRIPT."""

    def __init__(self, client: RedisClient, directory: Path = LUA, *, hold: bool = False) -> None:
        self._client = client
        self._directory = directory
        self._scripts: dict[str, Script] = {}
        self.loads = 0
        """SCRIPT LOADs sent (a test checks a flushed cache costs one more)."""
        pool = None if isinstance(client, RedisCluster) else client.connection_pool
        # One pooled connection kept between calls (see _evalsha), with ``hold`` only: the
        # owner of the client closes it (a backend over a client of the caller's is not
        # always closed, and each would keep a connection of that client's pool); never
        # from a pool of one, which other commands of the client need.
        held = hold and pool is not None and pool.max_connections >= 2
        self._pool = pool if held else None
        self._held: Any = None
        self._watchdog = Watchdog()

    def script(self, name: str) -> Script:
        script = self._scripts.get(name)
        if script is None:
            script = self._scripts[name] = load_script(name, self._directory)
        return script

    async def call(self, name: str, keys: Sequence[str], arguments: JSON = None) -> Any:
        """Run script ``name`` on ``keys`` with ``arguments`` (one JSON document); its
        JSON result, decoded."""
        script = self.script(name)
        argv = _ARGUMENTS.encode(arguments)
        try:
            raw = await self._evalsha(script.sha, keys, argv)
        except NoScriptError:
            await self._load(script, keys[0] if keys else None)
            try:
                raw = await self._evalsha(script.sha, keys, argv)
            except NoScriptError:
                if not isinstance(self._client, RedisCluster):
                    raise
                # A slot being migrated: the node that answered (ASK) is not yet the
                # slot's owner in the client's map, so every master gets the script.
                await self._load(script, None)
                raw = await self._client.evalsha(script.sha, len(keys), *keys, argv)
        if isinstance(raw, bytes):
            raw = raw.decode()
        return None if raw is None else json.loads(raw)

    async def _evalsha(self, sha: str, keys: Sequence[str], argv: str) -> Any:
        """EVALSHA on the connection held between calls when no other call is using it,
        else on one from the pool; afterwards the connection is held again if none is.

        redis-py's command path (the blocking pool's acquire and release, its retry and
        timeout wrappers) was 35 % of a one-job add's client time (cProfile, 3,000 adds);
        a caller that sends one script after another (a producer's adds, a worker's
        claims and settlements) takes the held connection every time. A connection whose
        call did not end in a reply (a cancellation, a lost connection, a timeout) is
        disconnected before it goes back to the pool. A cluster's client routes each
        call itself.
        """
        pool = self._pool
        if pool is None:
            return await self._client.evalsha(sha, len(keys), *keys, argv)
        conn = self._held
        self._held = None
        answered = False
        if conn is None:
            conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        else:
            try:  # as the pool checks a connection it hands out: a restarted server's
                await pool.ensure_connection(conn)  # closed socket is replaced, unsent
            except BaseException:
                await pool.release(conn)
                raise
        limit = conn.socket_timeout
        conn.socket_timeout = None  # the watchdog's one deadline instead (Watchdog)
        task = self._watchdog.start(limit)
        try:
            await conn.send_packed_command(pack_evalsha(sha, keys, argv))
            try:
                raw = await conn.read_response()
            except ResponseError:
                answered = True  # an error reply: the connection is ready for the next
                raise
            answered = True
            return raw
        except asyncio.CancelledError:
            if self._watchdog.expired(task):
                raise RedisTimeoutError(f"no reply from Redis within {limit} s") from None
            raise
        finally:
            self._watchdog.stop(task)
            conn.socket_timeout = limit
            if not answered:
                await conn.disconnect()
            if answered and self._held is None:
                self._held = conn
            else:
                await pool.release(conn)

    async def close(self) -> None:
        """Give the held connection back to its pool."""
        held, self._held = self._held, None
        if held is not None and self._pool is not None:
            await self._pool.release(held)

    async def _load(self, script: Script, key: str | None) -> None:
        self.loads += 1
        client = self._client
        if isinstance(client, RedisCluster) and key is not None:
            # The slot's node: the one that answered NOSCRIPT (after a MOVED, the client
            # has already learnt the new owner).
            node = client.get_node_from_key(key)
            sha = await client.execute_command("SCRIPT LOAD", script.source, target_nodes=node)
        else:
            sha = await client.script_load(script.source)
        if sha != script.sha:  # the server hashes what it was sent: never, but say so
            raise ConfigurationError(f"script {script.name}: server SHA {sha} != {script.sha}")
