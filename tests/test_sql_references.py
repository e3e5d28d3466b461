"""The comments of sql/ name files and Python objects that exist.

A file's header says where it is applied from and which files hold the other half of its
rules (the Python twin, the test comparing them); a rename that leaves them pointing
nowhere (``lane_pg/postgres/schema.py`` became a package) fails here.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from lane_pg._moved import new_home

REPO = Path(__file__).resolve().parent.parent
SQL_FILES = sorted((REPO / "sql").rglob("*.sql"))
# DESIGN.md is the project's shared design document, kept outside this repository.
EXTERNAL = {"DESIGN.md"}

_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]*\w\.(?:py|sql|md|toml))\b")
_BARE_FILE = re.compile(r"(?<![\w/.-])(\w+(?:\.down)?\.(?:sql|md))\b")
_PYTHON_NAME = re.compile(r"\blane_pg(?:\.\w+)+")


def _comments(path: Path) -> str:
    return "\n".join(
        line.split("--", 1)[1] for line in path.read_text().splitlines() if "--" in line
    )


def _references(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return sorted(
        {(path.name, match) for path in SQL_FILES for match in pattern.findall(_comments(path))}
    )


def test_named_paths_exist() -> None:
    missing = [ref for ref in _references(_PATH) if not (REPO / ref[1]).exists()]
    assert not missing, f"(sql file, named path) pairs naming nothing: {missing}"


def test_named_files_exist() -> None:
    """A file named without a directory: a SQL file of sql/, or a document of the
    repository's root or docs/."""
    places = [REPO, REPO / "docs", REPO / "sql" / "functions", REPO / "sql" / "migrations"]
    missing = [
        (sql_file, name)
        for sql_file, name in _references(_BARE_FILE)
        if name not in EXTERNAL
        and not name.startswith(".")
        and not any((place / name).exists() for place in places)
    ]
    assert not missing, f"(sql file, named file) pairs naming nothing: {missing}"


def _python_object_exists(reference: str, *, history: bool = False) -> bool:
    """``lane_pg.options.MAX_DURATION_MS``: the longest importable prefix, then attributes.
    ``history``: a migration's comment, written once, may name a module at the place it had
    then (``lane_pg._moved``)."""
    if history:
        reference = new_home(reference)
    parts = reference.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_named_python_objects_exist() -> None:
    missing = [
        ref
        for ref in _references(_PYTHON_NAME)
        if not _python_object_exists(ref[1], history=re.match(r"\d{4}_", ref[0]) is not None)
    ]
    assert not missing, f"(sql file, Python name) pairs naming nothing: {missing}"
