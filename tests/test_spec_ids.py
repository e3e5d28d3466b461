"""Every requirement id the code cites resolves in docs/spec.md, which defines each id once.

Comments, test names and docs/decisions.md cite the catalogue's ids (``RETRY-9``, ``A14``,
``test_lane_6_...``, "seed 003"). A citation of an id the catalogue does not define is a
typo or a stale id, and this test names the file and line.

Only tokens whose area is a heading of docs/spec.md count as ids, so error codes (``LN001``),
encodings and digests (``UTF-8``, ``SHA-256``), time zones (``Etc/GMT-14``) and other
``WORD-n`` tokens never match; bare decision ids are ``A1``..``A99`` standing alone.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "docs" / "spec.md"
CITING_TREES = ("lane_pg", "sql", "migrations", "tests")
CITING_FILES = (REPO / "docs" / "decisions.md",)
SKIPPED_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
THIS_FILE = Path(__file__).resolve()

AREA_HEADING = re.compile(r"^## ([A-Z]{2,6}) — ", re.MULTILINE)
DECISIONS_HEADING = re.compile(r"^## A — ", re.MULTILINE)
DEFINITION = re.compile(r"^- \*\*([A-Z]{2,6}-\d+|A\d+)\*\* \S", re.MULTILINE)
AREA_TABLE_ROW = re.compile(r"^\| ([A-Z]{1,6}) \| [^|]+ \| (\d+) \|$", re.MULTILINE)
SEED_DESCRIBED = re.compile(r"\*\*Seed (\d{3})\*\*")

SPEC_TEXT = SPEC.read_text(encoding="utf-8")
AREAS = tuple(AREA_HEADING.findall(SPEC_TEXT))


SIBLING = re.compile(r"(\.\.|/|, ?-)(\d+)")


def _citation_patterns(areas: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    alternatives = "|".join(sorted(areas, key=len, reverse=True))
    return (
        # AREA-n with a known area, not glued to a longer word or number, and its
        # shorthand siblings: "DEDUP-18, -19", "CLAIM-7/11", ranges "FLOW-5..9".
        re.compile(rf"(?<![\w/.-])({alternatives})-(\d+)((?:{SIBLING.pattern})*)(?![\w-])"),
        # A bare decision id: "A14", "(A2, A14)"; not "0xA1", "A1B2", "A-1" or "A1.5".
        re.compile(r"(?<![\w/.-])(A)(\d{1,2})(?![\w-]|\.\d)"),
        # The test-name convention: test_<area>_<n>_..., and a decision as its own word.
        re.compile(rf"\bdef test_({alternatives.lower()})_(\d+)_"),
        re.compile(r"\bdef test_\w*?_(a)(\d{1,2})(?:_\w*)?\("),
    )


PATTERNS = _citation_patterns(AREAS)
SEED_CITATION = re.compile(r"\bseeds? (\d{3})\b", re.IGNORECASE)


def cited_ids(text: str) -> list[str]:
    """The spec ids a text cites, in order of appearance (repeats kept)."""
    found: list[tuple[int, str]] = []
    for pattern in PATTERNS:
        for match in pattern.finditer(text):
            area, number = match.group(1).upper(), int(match.group(2))
            numbers = [number]
            for joint, sibling in SIBLING.findall(match.group(3) if match.re.groups > 2 else ""):
                start = numbers[-1] + 1 if joint == ".." else int(sibling)
                numbers.extend(range(start, int(sibling) + 1))
            for n in numbers:
                found.append((match.start(1), f"A{n}" if area == "A" else f"{area}-{n}"))
    return [spec_id for _, spec_id in sorted(found, key=lambda item: item[0])]


def _citing_files() -> Iterator[Path]:
    for tree in CITING_TREES:
        for path in sorted((REPO / tree).rglob("*")):
            skipped = SKIPPED_DIRS.intersection(path.parts) or path.suffix in {".pyc", ".so"}
            if path.is_file() and not skipped and path.resolve() != THIS_FILE:
                yield path
    yield from CITING_FILES


def _citations() -> Iterator[tuple[str, str]]:
    """(spec id or "seed NNN", "path:line") for every citation in the citing files."""
    for path in _citing_files():
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            where = f"{path.relative_to(REPO)}:{number}"
            for spec_id in cited_ids(line):
                yield spec_id, where
            for seed in SEED_CITATION.findall(line):
                yield f"seed {seed}", where


def _defined_ids() -> list[str]:
    return DEFINITION.findall(SPEC_TEXT)


def test_the_catalogue_has_its_areas_and_decisions() -> None:
    assert len(AREAS) >= 40, AREAS
    assert len(set(AREAS)) == len(AREAS), "an area heading appears twice"
    assert DECISIONS_HEADING.search(SPEC_TEXT), "the design decisions (A1..) heading is missing"


def test_the_catalogue_defines_each_id_once_under_its_own_heading() -> None:
    counts = Counter(_defined_ids())
    assert not [spec_id for spec_id, n in counts.items() if n > 1]
    sections = re.split(r"^## ", SPEC_TEXT, flags=re.MULTILINE)
    for section in sections:
        heading = section.split(" — ", 1)[0]
        for spec_id in DEFINITION.findall("\n" + section):
            area = "A" if re.fullmatch(r"A\d+", spec_id) else spec_id.split("-")[0]
            assert area == heading, f"{spec_id} is defined under the {heading} heading"


def test_each_area_is_numbered_from_one_without_gaps_as_the_area_table_says() -> None:
    numbers: dict[str, list[int]] = {}
    for spec_id in _defined_ids():
        match = re.fullmatch(r"([A-Z]+)-?(\d+)", spec_id)
        assert match, spec_id
        numbers.setdefault(match.group(1), []).append(int(match.group(2)))
    table = {area: int(n) for area, n in AREA_TABLE_ROW.findall(SPEC_TEXT)}
    assert set(table) == set(numbers) == {*AREAS, "A"}
    for area, listed in numbers.items():
        assert sorted(listed) == list(range(1, table[area] + 1)), area


def test_every_cited_id_is_defined_in_the_catalogue() -> None:
    defined = set(_defined_ids())
    seeds = {f"seed {n}" for n in SEED_DESCRIBED.findall(SPEC_TEXT)}
    citations = list(_citations())
    assert len({spec_id for spec_id, _ in citations}) > 100, "the extraction found too little"
    undefined = sorted(
        f"{where}: {spec_id}"
        for spec_id, where in citations
        if spec_id not in defined and spec_id not in seeds
    )
    assert not undefined, "cited but not defined in docs/spec.md:\n" + "\n".join(undefined)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# RETRY-9: the typed cause (A14; seed 003)", ["RETRY-9", "A14"]),
        ("-- PAUSE-4 (A8, A22): the connection-wide pause", ["PAUSE-4", "A8", "A22"]),
        (
            "UNIQ-1..3, -15; DEDUP-4 to DEDUP-9",
            ["UNIQ-1", "UNIQ-2", "UNIQ-3", "UNIQ-15", "DEDUP-4", "DEDUP-9"],
        ),
        (
            "(CLAIM-7/11, FLOW-1, -5..7)",
            ["CLAIM-7", "CLAIM-11", "FLOW-1", "FLOW-5", "FLOW-6", "FLOW-7"],
        ),
        ("def test_lane_6_lane_max_concurrency_and_fifo(", ["LANE-6"]),
        ("def test_lcfg_7_boost_curves_a15() -> None:", ["LCFG-7", "A15"]),
        ("raise LaneError('LN001: bad id') from UTF-8 SHA-256 HTTP-2 ISO-8601", []),
        ('("Etc/GMT-14", True), ("UTC-5", False)', []),
        ("digest 9fA1b2 0xA1 A1B2 A-1 A1.5 v1.A2 path/A3 FOO-1 RETRY-9a XRETRY-9", []),
        ("def test_rate_limit_a(self):  tx-1 retry-9 lane 6", []),
    ],
)
def test_the_extraction_takes_spec_ids_only(text: str, expected: list[str]) -> None:
    assert cited_ids(text) == expected
