"""``connect(url)``: the one way to open a backend from a URL (``App``, the CLI, your code).

=============================== ===========================================================
``postgresql://`` ``postgres://`` ``PostgresBackend`` (an asyncpg pool; the schema version is
                                  checked)
``memory://``                     a new, empty ``MemoryBackend`` (in this process only)
``redis://`` ``rediss://``        not available yet: ``ConfigurationError``
no URL (None or "")               ``$LANE_PG_DSN``, else the embedded PostgreSQL in
                                  ``./.lane_pg`` (``lane_pg.postgres.embedded``)
=============================== ===========================================================

Anything else is a ``ConfigurationError`` naming the accepted schemes. A backend's module
(and its driver) is imported only when a URL asks for it, so importing ``lane_pg`` loads
no database driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

from lane_pg.errors import ConfigurationError

if TYPE_CHECKING:
    from lane_pg.backend import JobQueueBackend

__all__ = [
    "ACCEPTED_SCHEMES",
    "BackendKind",
    "backend_kind",
    "connect",
    "redact_url",
    "resolve_url",
]

BackendKind: TypeAlias = Literal["postgresql", "memory"]

ACCEPTED_SCHEMES: tuple[str, ...] = ("postgresql://", "postgres://", "memory://")
_KINDS: dict[str, BackendKind] = {"postgresql": "postgresql", "postgres": "postgresql"}
_REDIS = ("redis", "rediss")


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
        raise ConfigurationError(
            f"{redact_url(url)!r}: the Redis backend is not available yet; use a"
            " postgresql:// URL (or memory:// for an in-process store)"
        )
    raise ConfigurationError(
        f"invalid DSN {redact_url(url)!r}: expected a URL starting with"
        f" {', '.join(ACCEPTED_SCHEMES[:-1])} or {ACCEPTED_SCHEMES[-1]}"
        " (e.g. postgresql://user:password@host:5432/dbname)"
    )


def resolve_url(url: str | None) -> str:
    """``url`` when given, else ``$LANE_PG_DSN``, else the embedded server's URL (started
    or joined on demand: ``pip install 'lane_pg[embedded]'``)."""
    if url:
        return url
    from lane_pg.postgres.embedded import resolve_dsn

    return resolve_dsn(None)


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
    the memory backend has no schema and no pool.
    """
    resolved = resolve_url(url)
    if backend_kind(resolved) == "memory":
        from lane_pg.memory import MemoryBackend

        return MemoryBackend()
    try:
        from lane_pg.postgres.backend import PostgresBackend
    except ModuleNotFoundError as exc:
        if exc.name != "asyncpg":
            raise
        raise ConfigurationError(
            "the PostgreSQL backend needs the asyncpg driver: pip install asyncpg"
            " (a dependency of lane_pg: reinstall lane_pg)"
        ) from exc
    return await PostgresBackend.connect(
        resolved, schema=schema, min_size=min_size, max_size=max_size, check_schema=check_schema
    )
