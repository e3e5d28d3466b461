"""Finding the versioned SQL files, rendering them for a schema, and the library's fingerprint."""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lane_pg.errors import ConfigurationError

if TYPE_CHECKING:
    pass


log = logging.getLogger("lane_pg.postgres.schema")


DEFAULT_SCHEMA = "lane"
BREAKING_MARKER = "-- lane:breaking"
# First key of the two-key advisory lock taken by every migrate path (asyncpg, Alembic,
# the printed SQL); the second key is hashtext(schema), so different schemas do not wait.
MIGRATE_LOCK_KEY = 0x4C414E45  # "LANE"
# The migration that creates <schema>.installed_sql: from this version on, every install
# records its fingerprints there and check_version compares them.
FINGERPRINT_VERSION = 4

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_MIGRATION_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
_QUALIFIED = re.compile(r'(?<![\w"])lane\.')
_SCHEMA_CLAUSE = re.compile(r"\b(SCHEMA\s+(?:IF\s+NOT\s+EXISTS\s+)?)lane\b", re.IGNORECASE)
_CREATE_SCHEMA = re.compile(r"\bCREATE\s+SCHEMA\s+(?!IF\s+NOT\s+EXISTS\b)", re.IGNORECASE)


# --------------------------------------------------------------------------- locating files
def _first_existing(name: str) -> Path:
    """``lane_pg/<name>`` inside an installed wheel, else ``<repo>/<name>`` of a checkout."""
    package_dir = Path(__file__).resolve().parents[2]  # lane_pg/
    for candidate in (package_dir / name, package_dir.parent / name):
        if candidate.is_dir():
            return candidate
    raise ConfigurationError(
        f"lane_pg cannot find its {name!r} directory (looked in {package_dir} and "
        f"{package_dir.parent}); reinstall the package"
    )


def sql_dir() -> Path:
    """The directory holding ``migrations/``, ``functions/`` and ``views.sql``."""
    return _first_existing("sql")


def migrations_dir() -> Path:
    """The Alembic script location (``env.py``, ``versions/``).

    A user with their own Alembic project names the revisions in ``version_locations`` as
    the package resource ``lane_pg:migrations/versions`` (``alembic_version_location()``;
    ``lane_pg/migrations`` is a symlink in a checkout, a directory in the wheel), upgrades
    with ``alembic upgrade heads`` (lane's branch is labelled ``lane_pg``) and calls
    ``reconcile_alembic_version`` in its env.py; the revisions read the schema from
    ``-x schema=...`` (default ``lane``).
    """
    return _first_existing("migrations")


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered SQL migration file."""

    version: int
    name: str
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def breaking(self) -> bool:
        first_line = self.text.lstrip("\ufeff").split("\n", 1)[0]
        return first_line.strip() == BREAKING_MARKER

    @property
    def description(self) -> str:
        return self.name.replace("_", " ")


def migration_files() -> list[Migration]:
    """Every ``sql/migrations/NNNN_<name>.sql``, in version order (numbers must be unique)."""
    directory = sql_dir() / "migrations"
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")) if directory.is_dir() else []:
        match = _MIGRATION_FILE.fullmatch(path.name)
        if match is None:
            continue
        version = int(match.group(1))
        if version in found:
            raise ConfigurationError(
                f"two migrations share number {version}: {found[version].path.name} and {path.name}"
            )
        found[version] = Migration(version, match.group(2), path)
    return [found[v] for v in sorted(found)]


def _schema_version() -> int:
    try:
        return max((m.version for m in migration_files()), default=0)
    except ConfigurationError:
        return 0


SCHEMA_VERSION: int = _schema_version()
"""The schema version this library requires: the highest migration number."""


# --------------------------------------------------------------------------- rendering
def validate_schema_name(name: str) -> str:
    """Return ``name`` if it is a plain lower-case SQL identifier, else raise.

    Checked before any SQL is composed (SCH-3): the name is formatted into SQL text.
    """
    if not isinstance(name, str) or _SCHEMA_NAME.fullmatch(name) is None:
        raise ConfigurationError(
            f"invalid schema name {name!r}: use 1-63 characters of a-z, 0-9 and _, "
            "not starting with a digit"
        )
    return name


def render_sql(text: str, schema: str) -> str:
    """Substitute the validated ``schema`` for the literal ``lane`` the SQL files use."""
    validate_schema_name(schema)
    if schema == DEFAULT_SCHEMA:
        return text
    text = _QUALIFIED.sub(f"{schema}.", text)
    return _SCHEMA_CLAUSE.sub(lambda m: f"{m.group(1)}{schema}", text)


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _lock_sql(schema: str) -> str:
    return f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK_KEY}, hashtext({_sql_literal(schema)}))"


def repeatable_files() -> list[Path]:
    """``sql/functions/*.sql`` in file-name order, then ``sql/views.sql``."""
    directory = sql_dir()
    functions = sorted((directory / "functions").glob("*.sql"))
    views = directory / "views.sql"
    return functions + ([views] if views.is_file() else [])


def repeatable_sql(schema: str = DEFAULT_SCHEMA) -> str:
    """Every repeatable file (``repeatable_files()``) rendered for ``schema``, in order."""
    parts = []
    directory = sql_dir()
    for path in repeatable_files():
        text = render_sql(path.read_text(encoding="utf-8"), schema)
        parts.append(f"-- lane_pg {path.relative_to(directory)}\n{text.rstrip()}\n")
    return "\n".join(parts)


@functools.cache
def library_fingerprint() -> str:
    """sha256 (hex) of this library's repeatable SQL as shipped: each file's path under
    ``sql/`` and its text (unrendered, so the schema name does not enter; line endings
    normalised, so a checkout with CRLF agrees with one without)."""
    digest = hashlib.sha256()
    directory = sql_dir()
    for path in repeatable_files():
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()
