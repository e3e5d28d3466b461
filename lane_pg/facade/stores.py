"""The store a connection writes to, and the one rule about it (CONN-11).

A store is named by a ``StoreKey``: ``("postgres", dsn, schema)`` (the DSN as given, with
``postgres://`` spelled ``postgresql://``), ``("local", absolute snapshot path, "")``, and,
for a driver that names its own store through a ``store_key`` attribute (a Redis driver:
URL and namespace), whatever it says. A memory, sync or null driver has none: nothing else
can reach its store.

Two connections over one store are refused: their pause, forwards and locks would look
like two things and be one (``refuse_shared_stores``). The same driver under two names is
an alias, one binding of the store, and allowed (an ``LANE_PG_CONNECTIONS`` entry naming
the default's driver, a name registered for the default's driver). Boot
(``bootstrap_from_env``), ``Q.set_driver`` / ``Q.register_connection`` and the entries
of a ``FailoverDriver`` (where even an alias is refused: falling over to the same store
is no failover) all apply this one function.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from lane_pg.errors import ConfigurationError

StoreKey: TypeAlias = tuple[str, str, str]


def postgres_store(dsn: str | None, schema: str) -> StoreKey:
    """The key of a PostgreSQL store; no DSN: the one ``$LANE_PG_DSN`` (else the embedded
    server) resolves to when the driver opens."""
    if not dsn:
        return ("postgres", "<$LANE_PG_DSN or the embedded server>", schema)
    text = dsn.strip()
    if text.lower().startswith("postgres://"):
        text = "postgresql://" + text[len("postgres://") :]
    return ("postgres", text, schema)


def redis_store(url: str) -> StoreKey:
    """The key of a Redis store: the server's URL and the key prefix (``?prefix=``)."""
    from lane_pg.backend.url import redis_url_parts

    base, prefix = redis_url_parts(url)
    return ("redis", base, prefix)


def local_store(path: str | Path) -> StoreKey:
    return ("local", str(Path(path).absolute()), "")


def describe_store(key: StoreKey) -> str:
    """The store for a message, its password redacted."""
    from lane_pg.backend.url import redact_url

    if key[0] == "local":
        return f"the snapshot {key[1]}"
    if key[0] == "postgres":
        return f"{redact_url(key[1])}, schema {key[2]!r}"
    return f"{key[0]} {redact_url(key[1])}, namespace {key[2]!r}"


def stores_of(driver: object) -> list[tuple[StoreKey, object]]:
    """The stores ``driver`` writes to, each with the driver that binds it: its own
    ``store_key``, or its entries' (a failover driver's)."""
    own = getattr(driver, "store_key", None)
    if isinstance(own, tuple):
        return [(own, driver)]
    entries = getattr(driver, "connections", None)
    if not isinstance(entries, list):
        return []
    return [found for entry in entries for found in stores_of(entry[1])]


def refuse_shared_stores(
    entries: Sequence[tuple[str, object]], *, aliases: bool = True, hint: str = ""
) -> None:
    """``ConfigurationError`` when two of the named ``entries`` reach one store through
    two drivers, or, unless ``aliases``, through one; ``hint`` ends the message."""
    seen: dict[StoreKey, tuple[str, object]] = {}
    for name, driver in entries:
        for key, binding in stores_of(driver):
            first = seen.setdefault(key, (name, binding))
            if first == (name, binding) or (aliases and first[1] is binding):
                continue
            raise ConfigurationError(
                f"connections {first[0]!r} and {name!r} are the same store"
                f" ({describe_store(key)}): two connections over one store are refused;"
                f" {hint or 'give one driver both names (an alias), or reach another store'}"
            )
