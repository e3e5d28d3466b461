"""The user docs (README.md and docs/*.md) are checked against the code they describe.

- Every ```python block runs against the real test PostgreSQL: each page is one session in a
  subprocess (tests/docs_runner.py) on a fresh migrated database. A block may be exempted
  only by an explicit ``<!-- not run: WHY -->`` line before it, and exemptions stay few.
- Every ```sql block runs too, page by page on one database, as a psql user pastes them.
- README's guide is followed end to end: the handlers it writes run in a real worker
  process, the failing job it enqueues fails, and the failed-job commands it shows list and
  retry it.
- docs/cli.md's command reference is what the argparse parser renders (tests/cli_doc.py).
- No user page cites internal spec item ids or migration numbers.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from lane_pg.postgres.schema import migrate
from tests import cli_doc
from tests.cli_runner import run_lane_pg
from tests.conftest import NewDatabase
from tests.docs_blocks import EXEMPTION, REPO, Block, blocks, python_blocks, user_pages

MAX_EXEMPTIONS = 4
PAGES = user_pages()
PAGES_WITH_PYTHON = [p for p in PAGES if any(b.exempt is None for b in python_blocks(p))]


def _env(dsn: str, workdir: Path) -> dict[str, str]:
    """The environment a reader has: ``LANE_PG_DSN`` and no other ``LANE_PG_*`` variable (so
    nothing falls back to the embedded server), the repository and WORKDIR importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANE_PG_")}
    env["LANE_PG_DSN"] = dsn
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(workdir), str(REPO), env.get("PYTHONPATH")])
    )
    return env


def _run(
    args: list[str], dsn: str, workdir: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        cwd=workdir,
        env=_env(dsn, workdir),
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )


async def _session(page: Path, dsn: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    done = await asyncio.to_thread(
        _run,
        [sys.executable, str(REPO / "tests" / "docs_runner.py"), str(page), str(workdir)],
        dsn,
        workdir,
    )
    assert done.returncode == 0, (
        f"a python block of {page.relative_to(REPO)} failed:\n{done.stdout}\n{done.stderr}"
    )
    return done


async def _cli(dsn: str, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command as the reader runs it; the worker in a real process (tests/cli_runner.py)."""
    return await asyncio.to_thread(run_lane_pg, *args, env=_env(dsn, workdir), cwd=workdir)


async def _fetch(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


@pytest.fixture
async def migrated_db(new_db: NewDatabase) -> str:
    dsn = await new_db()
    await migrate(dsn)
    return dsn


# ------------------------------------------------------------------ python blocks run


@pytest.mark.parametrize("page", PAGES_WITH_PYTHON, ids=lambda p: p.name)
async def test_every_python_block_of_the_page_runs(
    page: Path, migrated_db: str, tmp_path: Path
) -> None:
    done = await _session(page, migrated_db, tmp_path)
    ran = done.stdout.count("--- running ")
    expected = [b for b in python_blocks(page) if b.exempt is None]
    assert ran == len(expected), done.stdout


def test_python_blocks_are_run_or_explicitly_exempted() -> None:
    """A python (or sql) block is run unless the line before it exempts it; other spellings of
    Python fences (```py, ```python3, ```pycon) would escape the runner and are refused; an
    exemption that exempts no python block is a mistake; exemptions stay few."""
    exempted: list[Block] = []
    for page in PAGES:
        for block in blocks(page):
            assert block.lang not in {"py", "python3", "pycon", "ipython", "Python"}, (
                f"{block.where}: write ```python so the block runs"
            )
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if EXEMPTION.match(line.strip()):
                following = lines[number + 1] if number + 1 < len(lines) else ""
                assert following.strip() in ("```python", "```sql"), (
                    f"{page.name}:{number + 1}: an exemption must be just before a"
                    " ```python or ```sql fence"
                )
        exempted += [b for b in blocks(page) if b.exempt is not None]
    assert len(exempted) <= MAX_EXEMPTIONS, [b.where for b in exempted]


async def test_every_sql_block_runs(migrated_db: str) -> None:
    """The ```sql blocks of every user page run, page by page in order, on one database:
    what a psql user pastes works (README's CREATE TABLE comes before its enqueue)."""
    conn = await asyncpg.connect(migrated_db)
    try:
        for page in PAGES:
            for block in blocks(page):
                if block.lang != "sql" or block.exempt is not None:
                    continue
                try:
                    await conn.execute(block.source)
                except asyncpg.PostgresError as exc:
                    pytest.fail(f"{block.where}: {type(exc).__name__}: {exc}")
    finally:
        await conn.close()


# ------------------------------------------------------------------ README's guide, followed


async def test_readme_guide_end_to_end(migrated_db: str, tmp_path: Path) -> None:
    """The guide's enqueue blocks run (step 3), its handlers run in a real worker (step 4),
    the undeliverable job of step 5 fails for good and the failed-job commands list and
    retry it."""
    dsn = migrated_db
    await _session(REPO / "README.md", dsn, tmp_path)
    assert (tmp_path / "myapp" / "jobs.py").exists()

    worker = await _cli(
        dsn, tmp_path, "worker", "--app", "myapp.jobs", "--queue", "mail", "--burst"
    )
    assert worker.returncode == 0, worker.stdout + worker.stderr
    for email in (
        "ada@example.com",
        "grace@example.com",
        "alan@example.com",
        "barbara@example.com",
    ):
        assert f"welcome mail to {email}" in worker.stdout, worker.stdout
    states = await _fetch(dsn, "SELECT DISTINCT state FROM lane.jobs WHERE queue = 'mail'")
    assert [r["state"] for r in states] == ["completed"]

    billing = await _cli(
        dsn, tmp_path, "worker", "--app", "myapp.billing", "--queue", "billing", "--burst"
    )
    assert billing.returncode == 0, billing.stdout + billing.stderr
    assert "invoice for order 7" in billing.stdout

    # Step 5: the psql line of the guide, then the worker, then `failed` and `retry`.
    rows = await _fetch(
        dsn,
        "SELECT id FROM lane.add_job('mail', 'send_welcome',"
        ' \'{"email": "nobody@example.invalid"}\', \'{"attempts": 2}\')',
    )
    job_id = rows[0]["id"]
    worker = await _cli(
        dsn, tmp_path, "worker", "--app", "myapp.jobs", "--queue", "mail", "--burst"
    )
    assert worker.returncode == 0, worker.stdout + worker.stderr
    job = await _fetch(
        dsn, "SELECT state, attempts_made FROM lane.jobs WHERE queue = 'mail' AND id = $1", job_id
    )
    assert (job[0]["state"], job[0]["attempts_made"]) == ("failed", 2)

    failed = await _cli(dsn, tmp_path, "failed")
    assert failed.returncode == 0, failed.stderr
    assert "cannot deliver to nobody@example.invalid" in failed.stdout
    record = next(line for line in failed.stdout.splitlines() if "nobody@example.invalid" in line)
    record_id = record.split()[0]
    retried = await _cli(dsn, tmp_path, "retry", record_id)
    assert retried.returncode == 0, retried.stderr
    job = await _fetch(dsn, "SELECT state FROM lane.jobs WHERE queue = 'mail' AND id = $1", job_id)
    assert job[0]["state"] == "waiting"


# ------------------------------------------------------------------ generated reference


def test_cli_reference_is_what_the_parser_renders() -> None:
    section = cli_doc.section_of(cli_doc.DOC.read_text(encoding="utf-8"))
    assert section == cli_doc.render(), (
        "docs/cli.md's command reference differs from the parser: run `python -m tests.cli_doc`"
    )


def test_cli_reference_regeneration_keeps_the_prose() -> None:
    text = f"# Title\n\nprose\n\n{cli_doc.BEGIN}\nold\n{cli_doc.END}\n\nafter\n"
    regenerated = cli_doc.replace_section(text, "new")
    assert regenerated == f"# Title\n\nprose\n\n{cli_doc.BEGIN}\nnew\n{cli_doc.END}\n\nafter\n"
    assert cli_doc.section_of(regenerated) == "new"


def test_every_command_is_in_the_cli_reference() -> None:
    from lane_pg.cli import COMMANDS

    text = cli_doc.DOC.read_text(encoding="utf-8")
    for command in COMMANDS:
        assert f"\n### {command}\n" in text, command


# ------------------------------------------------------------------ no internal ids

SPEC_ITEM = re.compile(r"\b[A-Z]{2,6}-\d+[a-z]?\b")  # RETRY-9, STALL-5, CLI-4
DECISION_ID = re.compile(r"\bA\d{1,2}\b")  # A9, A14
SEED = re.compile(r"\bseed\s*0\d\d\b|\bseed's\b", re.IGNORECASE)  # seed 003
MIGRATION_NUMBER = re.compile(r"\bmigration\s+\d+|\b0\d{3}\b", re.IGNORECASE)  # migration 0018
SPEC_FILE = re.compile(r"FEATURES(\.md)?\b")
NOT_IDS = {"UTF-8"}


def _leaks(text: str) -> list[str]:
    found: list[str] = []
    for pattern in (SPEC_ITEM, DECISION_ID, SEED, MIGRATION_NUMBER, SPEC_FILE):
        found += [m.group(0) for m in pattern.finditer(text) if m.group(0) not in NOT_IDS]
    return found


# docs/CONTRACTS.md is the generated catalog of internal contracts (its prose and notes are
# the maintainers'): not checked here, though user pages link it for signatures.
ID_CHECKED = [p for p in PAGES if p.name != "CONTRACTS.md"]


@pytest.mark.parametrize("page", ID_CHECKED, ids=lambda p: p.name)
def test_user_docs_cite_no_internal_ids(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    leaks = [
        f"line {text.count(chr(10), 0, text.index(leak)) + 1}: {leak}" for leak in _leaks(text)
    ]
    assert not leaks, f"{page.name} cites internal ids: {leaks}"


def test_the_id_check_finds_each_kind_of_id() -> None:
    for leak in (
        "see RETRY-9",
        "(A9)",
        "seed 003 on the protocol",
        "migration 0018",
        "FEATURES.md",
        "STALL-5",
        "the seed's 7",
    ):
        assert _leaks(leak), leak
    assert not _leaks("LN009 DeduplicationConflict, UTF-8, 0 30 2 * * *, 2026-12-01 10:00:00")


# ------------------------------------------------------------------ links

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    headings = re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_pages_resolve(page: Path) -> None:
    for match in LINK.finditer(page.read_text(encoding="utf-8")):
        target = match.group("target")
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}: no such file"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name}: {target}: no such heading"
