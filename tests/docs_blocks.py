"""The fenced code blocks of the user docs (README.md and docs/*.md).

A ```python (or ```sql) block runs in tests/test_docs.py unless the line just before its fence is an
exemption, ``<!-- not run: WHY -->`` (a fragment that needs something the page cannot
build, or code that never returns). A first line ``# file: PATH`` makes the block a module
of the reader's project (written to PATH and imported).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEVELOPER_DOCS = {"decisions.md", "spec.md", "development.md"}
"""Pages for people working on lane_pg, not users: they may cite spec item ids."""

EXEMPTION = re.compile(r"^<!-- not run: (?P<why>\S.*?) -->$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
FILE_LINE = re.compile(r"^# file: (?P<path>[\w/]+\.py)$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    source: str
    exempt: str | None  # the reason, for an exempted block
    file: str | None  # the project path of a "# file:" block

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def user_pages() -> list[Path]:
    """README.md and every docs/ page a user reads."""
    pages = sorted(p for p in (REPO / "docs").glob("*.md") if p.name not in DEVELOPER_DOCS)
    return [REPO / "README.md", *pages]


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        previous = lines[index - 1].strip() if index > 0 else ""
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        body = lines[index + 1 : end]
        exemption = EXEMPTION.match(previous)
        file_line = FILE_LINE.match(body[0]) if body else None
        found.append(
            Block(
                page=page,
                line=index + 1,
                lang=opening.group("lang"),
                source="\n".join(body) + "\n",
                exempt=exemption.group("why") if exemption else None,
                file=file_line.group("path") if file_line else None,
            )
        )
        index = end + 1
    return found


def python_blocks(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang == "python"]
