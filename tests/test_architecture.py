"""docs/architecture.md's picture matches the folders: every file its entity table names
exists, its layout names every package and top-level module of lane_pg/ (and nothing that
is gone), and every handle of the contract is described."""

from __future__ import annotations

import re
from pathlib import Path

from lane_pg.backend import CAPABILITIES, HANDLES

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text()


def _section(title: str) -> str:
    start = PAGE.index(f"## {title}\n")
    end = PAGE.find("\n## ", start + 1)
    return PAGE[start : end if end != -1 else len(PAGE)]


def test_every_file_of_the_entity_table_exists() -> None:
    rows = [line for line in _section("One entity, one name").splitlines() if line.startswith("| ")]
    named = 0
    for row in rows[1:]:  # after the header
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        sql, files = cells[1], cells[2:]
        for name in re.findall(r"`([^`]+\.sql)`", sql):
            assert (ROOT / "sql" / "functions" / Path(name).name).is_file(), name
            named += 1
        for cell in files:
            for name in re.findall(r"`([^`]+\.py)`", cell):
                assert (ROOT / "lane_pg" / name).is_file(), name
                named += 1
    assert named > 40


def test_the_layout_names_every_package_and_top_level_module() -> None:
    layout = _section("Layout")
    listed = set(re.findall(r"^  (\S+)", layout.split("sql/\n")[0], flags=re.MULTILINE))
    present = {
        f"{path.name}/" if path.is_dir() else path.name
        for path in (ROOT / "lane_pg").iterdir()
        if not path.name.startswith("__pycache__")
        and path.name != "py.typed"
        and (path.is_dir() or path.suffix == ".py")
    }
    present = {"migrations" if name == "migrations/" else name for name in present}
    assert listed == present


def test_every_handle_is_described() -> None:
    contract = _section("The contract")
    for handle in (*HANDLES, *CAPABILITIES):
        assert f"`{handle.name}`" in contract, handle.name
