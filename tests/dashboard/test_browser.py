"""The dashboard in a real browser (Playwright driving Debian's chromium, which
``.ci/run`` installs): a dashboard process and a worker process on a database of their
own, clicked through as a person would. The screenshots of docs/ are taken here.

Skipped, with the reason, where chromium or Playwright is missing (``make test`` on a
machine set up by ``.ci/run`` has both)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobSpec
from tests.conftest import NewDatabase, migrate_lane
from tests.dashboard.processes import dashboard_url, spawn, stop

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = os.environ.get("LANE_PG_SCREENSHOTS")
"""Where the tests save their screenshots: ``LANE_PG_SCREENSHOTS=docs/images`` refreshes the
pictures of docs/ (so a plain test run leaves the tree as it was); else a temporary
directory."""
playwright_api = pytest.importorskip("playwright.async_api", reason="pip install playwright")
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium: apt-get install chromium"),
    pytest.mark.timeout(180),
]
expect = playwright_api.expect
# A deadline, not a pause: each expectation returns as soon as it holds. Playwright's 5 s
# default was too short for the live stream's first snapshot once, in a full suite run on
# a loaded 2-core machine (the page, the dashboard and a worker process share the cores).
expect.set_options(timeout=20_000)


@dataclass
class Site:
    url: str
    dsn: str
    backend: PostgresBackend
    tmp: Path

    def screenshot(self, name: str) -> str:
        directory = Path(SCREENSHOTS) if SCREENSHOTS else self.tmp
        directory.mkdir(parents=True, exist_ok=True)
        return str(directory / name)


@pytest_asyncio.fixture
async def site(new_db: NewDatabase, tmp_path: Path) -> AsyncIterator[Site]:
    dsn = await new_db()
    await asyncio.to_thread(migrate_lane, dsn)
    backend = await PostgresBackend.connect(dsn, min_size=1, max_size=2)
    dashboard = spawn(["dashboard", "--port", "0", "--poll-interval", "0.5"], dsn, tmp_path)
    worker = spawn(
        [
            "worker",
            "--app",
            "tests.dashboard.browser_app:app",
            "--queue",
            "payments",
            "--queue",
            "emails",
            "--poll-interval",
            "300ms",
            "--shutdown-timeout",
            "2s",
        ],
        dsn,
        tmp_path,
    )
    try:
        url = await dashboard_url(dashboard)
        yield Site(url, dsn, backend, tmp_path)
    finally:
        stop(worker)
        stop(dashboard)
        await backend.close()


@pytest_asyncio.fixture
async def chromium() -> AsyncIterator[object]:
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            await browser.close()


async def failed_job(site: Site, marker: Path, data: dict[str, object] | None = None) -> str:
    """A ``charge`` job of ``payments`` that failed for good (its marker missing)."""
    [job] = await site.backend.add_jobs(
        "payments", [JobSpec("charge", {"marker": str(marker), **(data or {})}, {"attempts": 1})]
    )
    for _ in range(600):
        if await site.backend.get_job_state("payments", job.id) == "failed":
            return job.id
        await asyncio.sleep(0.05)
    raise AssertionError("the worker did not fail the job")


async def test_overview_loads_and_its_counts_follow_the_queue_live(
    site: Site, chromium: object
) -> None:
    await site.backend.add_jobs(
        "emails", [JobSpec("noop", {"to": f"u{n}@example.com"}) for n in range(5)]
    )
    # A queue no worker serves, paused, with jobs waiting and due later: for the picture.
    await site.backend.add_jobs("reports", [JobSpec("monthly", {"month": n}) for n in range(12)])
    later = [JobSpec("monthly", {"month": n}, {"delay_ms": 3_600_000}) for n in range(4)]
    await site.backend.add_jobs("reports", later)
    await site.backend.pause_queue("reports")
    await failed_job(site, site.tmp / "never", {"user": {"id": 7}})
    page = await chromium.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    await page.goto(site.url + "/")
    await expect(page.locator("h1")).to_have_text("Overview")
    failed = page.locator('[data-live="payments:failed"]')
    await expect(failed).to_have_text("1")
    await expect(page.locator('[data-live-paused="reports"]')).to_be_visible()
    await expect(page.locator('[data-live-paused="payments"]')).to_be_hidden()
    await expect(page.locator("#live.on")).to_have_count(1)  # the event stream is up
    # A new failure shows without a reload: the stream pushes the new counts.
    await failed_job(site, site.tmp / "never-2")
    await expect(failed).to_have_text("2")
    await page.screenshot(path=site.screenshot("dashboard-overview.png"), full_page=True)


async def test_filter_jobs_by_a_json_path_and_open_a_job(site: Site, chromium: object) -> None:
    await site.backend.pause_queue("emails")  # keep them waiting, to be listed
    await site.backend.add_jobs(
        "emails",
        [JobSpec("noop", {"user": {"id": n}, "template": "welcome"}) for n in range(1, 6)],
    )
    page = await chromium.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    await page.goto(site.url + "/jobs?state=waiting")
    await page.fill('input[name="q"]', "queue:emails data.user.id:3")
    await page.click('#search button[type="submit"]')
    rows = page.locator("#jobs tbody tr[data-job]")
    await expect(rows).to_have_count(1)
    await page.screenshot(path=site.screenshot("dashboard-jobs.png"), full_page=True)
    await rows.first.locator("a").first.click()
    await expect(page.locator("#data")).to_contain_text('"id": 3')


async def test_retry_a_failed_job_and_see_it_run(site: Site, chromium: object) -> None:
    marker = site.tmp / "bank-is-up"
    job_id = await failed_job(site, marker)
    page = await chromium.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    await page.goto(f"{site.url}/queues/payments/jobs/{job_id}")
    await expect(page.locator("#failed-reason")).to_contain_text("the bank is down")
    await page.screenshot(path=site.screenshot("dashboard-job.png"), full_page=True)
    marker.write_text("up")
    await page.click('button[data-action="retry"]')
    await expect(page.locator(".notice")).to_contain_text(f"job {job_id} retried")
    for _ in range(100):  # the worker runs it: reload until the page says so
        await page.reload()
        if await page.locator("h1 .state").text_content() == "completed":
            break
        await asyncio.sleep(0.1)
    await expect(page.locator("h1 .state")).to_have_text("completed")
    await expect(page.locator("#result")).to_contain_text('"charged": true')
    events = [e.event for e in await site.backend.read_events("payments")]
    assert "action" in events


async def test_pause_a_queue_and_the_worker_stops_claiming_it(site: Site, chromium: object) -> None:
    await site.backend.add_jobs("payments", [JobSpec("noop")])  # the queue exists, runs
    page = await chromium.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    await page.goto(site.url + "/queues/payments")
    await page.click('button[data-action="pause"]')
    await expect(page.locator(".notice")).to_contain_text("paused")
    # The live stream's first snapshot is read after the page, so it keeps the badge.
    await expect(page.locator("body[data-live-updates]")).to_have_count(1)
    await expect(page.locator('h1 [data-live-paused="payments"]')).to_be_visible()
    await page.screenshot(path=site.screenshot("dashboard-queue.png"), full_page=True)
    assert await site.backend.is_queue_paused("payments")
    [held] = await site.backend.add_jobs("payments", [JobSpec("noop")])
    # The worker serves both queues with one claim: once a job of emails, added after
    # the held one, is done, the claim that took it passed the paused queue over.
    [probe] = await site.backend.add_jobs("emails", [JobSpec("noop")])
    for _ in range(300):
        if await site.backend.get_job_state("emails", probe.id) == "completed":
            break
        await asyncio.sleep(0.05)
    assert await site.backend.get_job_state("emails", probe.id) == "completed"
    assert await site.backend.get_job_state("payments", held.id) == "waiting"
    await page.click('button[data-action="resume"]')
    for _ in range(300):
        if await site.backend.get_job_state("payments", held.id) == "completed":
            break
        await asyncio.sleep(0.05)
    assert await site.backend.get_job_state("payments", held.id) == "completed"


async def test_a_read_only_viewer_gets_no_buttons_and_a_403_on_a_forged_post(
    site: Site, chromium: object
) -> None:
    await failed_job(site, site.tmp / "never")
    guarded = spawn(
        ["dashboard", "--port", "0"],
        site.dsn,
        site.tmp,
        {"LANE_PG_DASHBOARD_AUTH": "admin:adm1n", "LANE_PG_DASHBOARD_READONLY_AUTH": "viewer:v1ew"},
    )
    try:
        url = await dashboard_url(guarded)
        context = await chromium.new_context(  # type: ignore[attr-defined]
            http_credentials={"username": "viewer", "password": "v1ew"}
        )
        page = await context.new_page()
        for path in ("/", "/queues/payments", "/jobs?state=failed&q=queue:payments"):
            await page.goto(url + path)
            await expect(page.locator("#read-only")).to_have_count(1)
            await expect(page.locator("button[data-action]")).to_have_count(0)
        token = await page.locator("body").get_attribute("data-csrf")
        response = await page.request.post(
            url + "/actions/pause", form={"csrf": token or "", "queue": "payments"}
        )
        assert response.status == 403
        assert not await site.backend.is_queue_paused("payments")
        # The admin gets the buttons, and no credentials get nothing at all.
        admin = await chromium.new_context(  # type: ignore[attr-defined]
            http_credentials={"username": "admin", "password": "adm1n"}
        )
        admin_page = await admin.new_page()
        await admin_page.goto(url + "/queues/payments")
        await expect(admin_page.locator('button[data-action="pause"]')).to_have_count(1)
        anonymous = await chromium.new_context()  # type: ignore[attr-defined]
        assert (await anonymous.request.get(url + "/")).status == 401
    finally:
        stop(guarded)
