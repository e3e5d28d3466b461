"""The stored-function section of docs/CONTRACTS.md, generated from the catalog.

``make contracts`` (``python -m tests.postgres.contracts_doc``) installs the schema in a
fresh database of the test server (``LANE_PG_TEST_DSN``) and rewrites the section between
the two markers: one line per public function of ``lane`` (a name not starting with
``_``), with its argument names, types and defaults and its result, as
``pg_get_function_arguments`` / ``pg_get_function_result`` print them. Text after the
signature (`` — note``) is kept, by function name. tests/postgres/test_contracts_doc.py
fails when the file differs from what this produces.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import asyncpg

DOC = Path(__file__).resolve().parents[2] / "docs" / "CONTRACTS.md"
BEGIN = (
    "<!-- stored-functions: generated from the catalog by `make contracts`;"
    " edit only the notes after a signature -->"
)
END = "<!-- /stored-functions -->"
NOTE_SEPARATOR = " — "
_LINE = re.compile(r"- `(?P<name>\w+)\(.*\) RETURNS .*`(?: — (?P<note>.+))?")

QUERY = """
SELECT p.proname AS name, pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result
  FROM pg_proc p
 WHERE p.pronamespace = 'lane'::regnamespace AND p.proname !~ '^_'
 ORDER BY p.proname COLLATE "C", p.oid::regprocedure::text COLLATE "C"
"""

Signature = tuple[str, str, str]


async def catalog_functions(dsn: str) -> list[Signature]:
    """``(name, arguments, result)`` of every public function of schema ``lane``; types
    named relative to an empty search_path (``lane.jobs``, whatever the session's)."""
    conn = await asyncpg.connect(dsn, server_settings={"search_path": "pg_catalog"})
    try:
        rows = await conn.fetch(QUERY)
    finally:
        await conn.close()
    return [(row["name"], row["arguments"], row["result"]) for row in rows]


def section_of(text: str) -> str:
    """The lines between the markers."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC.name} lacks the markers {BEGIN!r} ... {END!r}")
    return text[start + len(BEGIN) : end].strip("\n")


def notes_of(section: str) -> dict[str, str]:
    """``{function name: note}`` of the section's lines that carry one."""
    notes: dict[str, str] = {}
    for line in section.splitlines():
        match = _LINE.fullmatch(line.strip())
        if match is not None and match["note"]:
            notes[match["name"]] = match["note"]
    return notes


def render(functions: list[Signature], notes: dict[str, str]) -> str:
    lines = []
    for name, arguments, result in functions:
        note = notes.get(name)
        suffix = f"{NOTE_SEPARATOR}{note}" if note else ""
        lines.append(f"- `{name}({arguments}) RETURNS {result}`{suffix}")
    return "\n".join(lines)


def replace_section(text: str, section: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return f"{text[:start]}\n{section}\n{text[end:]}"


async def _generate() -> None:
    from lane_pg.postgres.schema import migrate
    from tests.conftest import admin_dsn, create_database, drop_spare_databases, release_databases

    created: list[str] = []
    try:
        dsn = await create_database(created)
        await migrate(dsn)
        functions = await catalog_functions(dsn)
    finally:
        await release_databases(created)
        drop_spare_databases(admin_dsn())  # no pytest session here to drop it at its end
    text = DOC.read_text(encoding="utf-8")
    section = render(functions, notes_of(section_of(text)))
    DOC.write_text(replace_section(text, section), encoding="utf-8")
    print(f"{DOC}: {len(functions)} stored functions")


if __name__ == "__main__":
    asyncio.run(_generate())
