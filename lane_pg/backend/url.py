"""``connect(url)``: the one way to open a backend from a URL (``App``, the CLI, your code).

=============================== ===========================================================
``postgresql://`` ``postgres://`` ``PostgresBackend`` (an asyncpg pool; the schema version is
                                  checked)
``memory://``                     a new, empty ``MemoryBackend`` (in this process only)
``redis://`` ``rediss://``        ``RedisBackend`` (the server checked: noeviction, version);
                                  its keys under the prefix ``?prefix=NAME`` (default
                                  ``lane``)
``redis+cluster://``              ``RedisBackend`` on a Redis Cluster (any node's address: the
``rediss+cluster://``             others are discovered; every master checked)
no URL (None or "")               ``$LANE_PG_DSN``, else the embedded PostgreSQL in
                                  ``./.lane_pg`` (``lane_pg.postgres.embedded``)
=============================== ===========================================================

Anything else is a ``ConfigurationError`` naming the accepted schemes. The backends are
found through ``BACKENDS``, a table of ``"module:attribute"`` strings imported when a URL
asks for one: this contract package imports no backend
implementation (the import contracts of pyproject.toml), so importing ``lane_pg`` loads no
database driver. A PostgreSQL URL's kind is ``postgres``, whichever of its two schemes it
is written with: the one label a PostgreSQL connection carries (docs/decisions.md).

The same table names what a kind brings that a caller above the contract (the facade, the
app) needs before, or without, opening a backend: its failed-job store
(``failed_store_of``); and ``validate_schema`` applies the rule of ``connect``'s
``schema``, PostgreSQL's.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lane_pg.errors import ConfigurationError

if TYPE_CHECKING:
    from lane_pg.backend import JobQueueBackend
    from lane_pg.backend.failed import FailedJobStore

__all__ = [
    "ACCEPTED_SCHEMES",
    "BACKENDS",
    "BackendEntry",
    "BackendKind",
    "backend_kind",
    "connect",
    "failed_store_of",
    "redact_url",
    "redis_cluster_url",
    "redis_url_parts",
    "resolve_url",
    "validate_schema",
    "with_redis_prefix",
]

BackendKind: TypeAlias = Literal["postgres", "memory", "redis"]

ACCEPTED_SCHEMES: tuple[str, ...] = (
    "postgresql://",
    "postgres://",
    "redis://",
    "rediss://",
    "redis+cluster://",
    "rediss+cluster://",
    "memory://",
)
_KINDS: dict[str, BackendKind] = {"postgresql": "postgres", "postgres": "postgres"}
_REDIS = ("redis", "rediss")
_CLUSTER = "+cluster"
"""The scheme suffix of a Redis Cluster's URL: the client differs (it routes each key to
its slot's node), so the URL says which one, rather than a probe at every connect."""


@dataclass(frozen=True)
class BackendEntry:
    """Where a backend kind's opener lives, as text so that naming it imports nothing.

    ``opener`` is ``"module:attribute[.attribute]"``: an async callable
    ``(url, *, schema, min_size, max_size, check_schema)`` returning the opened backend.
    ``title`` and ``install`` word the error of a missing driver. ``failed_store``, when
    the kind keeps failed-job records of its own (FAIL-8), names the store's class: called
    with an open backend of the kind, or with a source that opens one on first use (an
    object with ``async backend()``, so binding it does no I/O)."""

    opener: str
    title: str
    install: str = ""
    failed_store: str = ""


BACKENDS: dict[str, BackendEntry] = {
    "postgres": BackendEntry(
        "lane_pg.postgres.backend:PostgresBackend.connect",
        "PostgreSQL",
        "(a dependency of lane_pg: reinstall lane_pg)",
        failed_store="lane_pg.postgres.failed:DatabaseFailedJobStore",
    ),
    "memory": BackendEntry("lane_pg.memory:open_memory", "memory"),
    "redis": BackendEntry(
        "lane_pg.redis.backend:open_redis", "Redis", "(or pip install 'lane_pg[redis]')"
    ),
}
"""Backend kind (``backend_kind``) -> its opener, for ``connect``."""

DEFAULT_URL = "lane_pg.postgres.embedded:resolve_dsn"
"""The resolver of an absent URL: ``$LANE_PG_DSN``, else the embedded server's URL."""

SCHEMA_RULE = "lane_pg.postgres.schema:validate_schema_name"
"""The rule of ``connect``'s ``schema`` (a plain SQL identifier, SCH-3): PostgreSQL's, the
one backend with schemas."""


def _resolve(target: str) -> Any:
    """The object ``"module:attribute[.attribute]"`` names, its module imported now."""
    module_name, _, path = target.partition(":")
    found: Any = importlib.import_module(module_name)
    for attribute in path.split("."):
        found = getattr(found, attribute)
    return found


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages)."""
    if "://" not in url or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    auth, sep, host = rest.rpartition("@")
    if ":" in auth:
        user = auth.split(":", 1)[0]
        return f"{scheme}://{user}:***{sep}{host}"
    return url


def backend_kind(url: str) -> BackendKind:
    """Which backend ``url`` opens; a ``ConfigurationError`` for a URL none opens."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in _KINDS:
        return _KINDS[scheme]
    if scheme == "memory":
        if url.split("://", 1)[1]:
            raise ConfigurationError(
                f"invalid DSN {redact_url(url)!r}: memory:// takes no host, path or"
                " parameters (each connect() opens a new, empty in-process store)"
            )
        return "memory"
    if scheme in _REDIS:
        return "redis"
    if scheme.removesuffix(_CLUSTER) in _REDIS:
        redis_cluster_url(url)  # a cluster's URL refused now, not at its first command
        return "redis"
    raise ConfigurationError(
        f"invalid DSN {redact_url(url)!r}: expected a URL starting with"
        f" {', '.join(ACCEPTED_SCHEMES[:-1])} or {ACCEPTED_SCHEMES[-1]}"
        " (e.g. postgresql://user:password@host:5432/dbname)"
    )


def redis_url_parts(url: str) -> tuple[str, str]:
    """A ``redis://`` URL without its ``prefix`` query parameter, and that prefix (default
    ``lane``): the key prefix is lane_pg's, and the Redis client refuses parameters it does
    not know."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [value for key, value in query if key == "prefix"]
    rest = urlencode([(key, value) for key, value in query if key != "prefix"])
    return urlunsplit(parts._replace(query=rest)), prefixes[-1] if prefixes else "lane"


def redis_cluster_url(url: str) -> str | None:
    """The plain ``redis://`` (``rediss://``) URL of a ``redis+cluster://`` one, None for a
    URL of one server. A cluster has database 0 only: another is a ``ConfigurationError``."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.lower().endswith(_CLUSTER):
        return None
    plain = f"{scheme[: -len(_CLUSTER)]}://{rest}"
    database = urlsplit(plain).path.strip("/")
    if database not in ("", "0"):
        raise ConfigurationError(
            f"invalid DSN {redact_url(url)!r}: a Redis Cluster has database 0 only"
            f" (the URL names database {database!r})"
        )
    return plain


def with_redis_prefix(url: str, prefix: str) -> str:
    """``url`` with its key prefix set to ``prefix`` (checked when the backend opens)."""
    base, _ = redis_url_parts(url)
    parts = urlsplit(base)
    query = [*parse_qsl(parts.query, keep_blank_values=True), ("prefix", prefix)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def validate_schema(schema: str) -> str:
    """``schema`` when ``connect`` accepts it (``SCHEMA_RULE``), else ``ConfigurationError``:
    checked when a schema is configured, before anything opens."""
    return cast(str, _resolve(SCHEMA_RULE)(schema))


def failed_store_of(kind: str, source: object) -> FailedJobStore | None:
    """The failed-job store a backend of ``kind`` keeps (``BackendEntry.failed_store``) over
    ``source``, an open backend of that kind or a source that opens one on first use; None
    for a kind that keeps none (memory)."""
    entry = BACKENDS.get(kind)
    if entry is None or not entry.failed_store:
        return None
    return cast("FailedJobStore", _resolve(entry.failed_store)(source))


def resolve_url(url: str | None) -> str:
    """``url`` when given, else ``$LANE_PG_DSN``, else the embedded server's URL (started
    or joined on demand: ``pip install 'lane_pg[embedded]'``)."""
    if url:
        return url
    return cast(str, _resolve(DEFAULT_URL)(None))


async def connect(
    url: str | None = None,
    *,
    schema: str = "lane",
    min_size: int = 1,
    max_size: int = 10,
    check_schema: bool = True,
) -> JobQueueBackend:
    """Open the backend ``url`` names (see the module docstring); the caller closes it.

    ``schema``, ``min_size``/``max_size`` (the pool) and ``check_schema`` are PostgreSQL's;
    the memory backend has no schema and no pool; Redis takes its key prefix from the URL
    (``?prefix=``) and sizes its pool by ``max_size``.
    """
    resolved = resolve_url(url)
    kind = backend_kind(resolved)
    entry = BACKENDS[kind]
    try:
        opener = cast(Callable[..., Awaitable["JobQueueBackend"]], _resolve(entry.opener))
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "lane_pg":
            raise
        driver = exc.name.split(".")[0]
        raise ConfigurationError(
            f"the {entry.title} backend needs the {driver} driver: pip install {driver}"
            + (f" {entry.install}" if entry.install else "")
        ) from exc
    return await opener(
        resolved, schema=schema, min_size=min_size, max_size=max_size, check_schema=check_schema
    )
