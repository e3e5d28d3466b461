"""The dashboard's pages and actions through an ASGI client, on memory and PostgreSQL:
what a viewer sees, what each action changes, and what is refused."""

from __future__ import annotations

import base64
import re

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.dashboard import environment_access, read_only
from lane_pg.types import Completion, Failure, JobSpec, QueueDemand
from tests.dashboard.conftest import Browser, MakeBrowser


async def fail_one(
    backend: JobQueueBackend, queue: str, name: str = "charge", data: object = None
) -> str:
    """Adds a job with one attempt, claims it and fails it for good; its id."""
    [job] = await backend.add_jobs(queue, [JobSpec(name, data, {"attempts": 1})])
    [claimed] = await backend.claim_jobs("w1", [QueueDemand(queue, 1)], 30)
    assert claimed.id == job.id and claimed.lock_token is not None
    await backend.fail_jobs(
        [Failure(queue, job.id, claimed.lock_token, "card declined", "Traceback: boom")]
    )
    return job.id


async def test_overview_shows_each_queue_with_its_counts_and_pause(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    await fail_one(backend, queue_name)  # first: fail_one claims the queue's next job
    await backend.add_jobs(queue_name, [JobSpec("a"), JobSpec("b")])
    await backend.pause_queue(queue_name)
    html = await browser.page("/")
    row = re.search(rf'<tr data-queue="{queue_name}">(.*?)</tr>', html, re.S)
    assert row is not None
    assert f'data-live="{queue_name}:waiting">2<' in row.group(1)
    assert f'data-live="{queue_name}:failed">1<' in row.group(1)
    assert f'data-live-paused="{queue_name}" >' in row.group(1).replace("  ", " ")
    assert "Resume" in row.group(1)


async def test_jobs_search_by_name_and_json_path(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    await backend.add_jobs(
        queue_name,
        [
            JobSpec("mail", {"user": {"id": 42}, "plan": "gold"}),
            JobSpec("mail", {"user": {"id": "42"}}),
            JobSpec("sms", {"user": {"id": 42}}),
        ],
    )
    html = await browser.page(f"/jobs?state=waiting&q=queue:{queue_name}+data.user.id:42")
    assert html.count("<tr data-job=") == 2  # the number 42, not the text "42"
    html = await browser.page(f"/jobs?state=waiting&q=queue:{queue_name}+name:mail+data.user.id:42")
    assert html.count("<tr data-job=") == 1
    html = await browser.page(f'/jobs?state=waiting&q=queue:{queue_name}+data.user.id:"42"')
    assert html.count("<tr data-job=") == 1
    html = await browser.page(f"/jobs?state=waiting&q=queue:{queue_name}+bogus:1")
    assert 'id="search-error"' in html and "unknown key" in html


async def test_jobs_search_by_id_finds_the_job_in_any_queue(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    [job] = await backend.add_jobs(queue_name, [JobSpec("x")])
    html = await browser.page(f"/jobs?state=waiting&q=id:{job.id}")
    assert f'<tr data-job="{job.id}">' in html


async def test_job_page_shows_data_failure_traces_logs_and_events(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    job_id = await fail_one(backend, queue_name, data={"order": 7})
    await backend.add_job_log(queue_name, job_id, "charging card")
    html = await browser.page(f"/queues/{queue_name}/jobs/{job_id}")
    assert "&#34;order&#34;: 7" in html or '"order": 7' in html
    assert "card declined" in html
    assert "Traceback: boom" in html
    assert "charging card" in html
    assert "<strong>failed</strong>" in html  # the events timeline
    await browser.page(f"/queues/{queue_name}/jobs/nope", status=404)


async def test_hide_data_shows_no_payload_and_refuses_data_search(
    backend: JobQueueBackend, make_browser: MakeBrowser, queue_name: str
) -> None:
    browser = make_browser(hide_data=True)
    [job] = await backend.add_jobs(queue_name, [JobSpec("x", {"card": "4242-secret"})])
    html = await browser.page(f"/queues/{queue_name}/jobs/{job.id}")
    assert "4242-secret" not in html and "hidden" in html
    html = await browser.page(f"/jobs?state=waiting&q=queue:{queue_name}")
    assert f'<tr data-job="{job.id}">' in html and "4242-secret" not in html
    html = await browser.page(f"/jobs?state=waiting&q=queue:{queue_name}+data.card:x")
    assert "searching job data is off" in html


async def test_a_data_formatter_rewrites_what_is_shown(
    backend: JobQueueBackend, make_browser: MakeBrowser, queue_name: str
) -> None:
    def mask(job: object, field: str, value: object) -> object:
        if field == "data" and isinstance(value, dict):
            return {key: "***" if key == "card" else item for key, item in value.items()}
        return value

    browser = make_browser(format_data=mask)
    [job] = await backend.add_jobs(queue_name, [JobSpec("x", {"card": "4242", "n": 1})])
    for path in (
        f"/queues/{queue_name}/jobs/{job.id}",
        f"/jobs?state=waiting&q=queue:{queue_name}",
    ):
        html = await browser.page(path)
        assert "4242" not in html and "***" in html, path


async def test_pause_and_resume_change_the_queue_and_record_who_did_it(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    await backend.add_jobs(queue_name, [JobSpec("x")])
    response = await browser.post("pause", queue=queue_name, back=f"/queues/{queue_name}")
    assert response.headers["location"].startswith(f"/queues/{queue_name}?notice=")
    assert await backend.is_queue_paused(queue_name)
    actions = [e for e in await backend.read_events(queue_name) if e.event == "action"]
    assert [(e.data["action"], e.data["actor"]) for e in actions] == [("pause", "tester")]
    await browser.post("resume", queue=queue_name)
    assert not await backend.is_queue_paused(queue_name)


async def test_limits_are_set_and_cleared_and_bad_input_changes_nothing(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    await backend.add_jobs(queue_name, [JobSpec("x")])
    await browser.post("rate-limit", queue=queue_name, max="5", duration_ms="1000")
    limit = await backend.get_claim_rate_limit(queue_name)
    assert limit is not None and (limit.max, limit.duration_ms) == (5, 1000)
    response = await browser.post("rate-limit", queue=queue_name, max="zero", duration_ms="1")
    assert "error=" in response.headers["location"]
    assert await backend.get_claim_rate_limit(queue_name) == limit
    await browser.post("max-active", queue=queue_name, max_active="3")
    assert await backend.get_max_active_jobs(queue_name) == 3
    await browser.post("max-active", queue=queue_name, clear="1")
    await browser.post("rate-limit", queue=queue_name, clear="1")
    assert await backend.get_max_active_jobs(queue_name) is None
    assert await backend.get_claim_rate_limit(queue_name) is None


async def test_retry_a_failed_job_puts_it_back_to_wait(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    job_id = await fail_one(backend, queue_name)
    await browser.post("retry", queue=queue_name, job_id=job_id)
    assert await backend.get_job_state(queue_name, job_id) == "waiting"
    # Retrying it again (no longer failed) is refused with a message, nothing changes.
    response = await browser.post("retry", queue=queue_name, job_id=job_id)
    assert "error=" in response.headers["location"]
    assert await backend.get_job_state(queue_name, job_id) == "waiting"


async def test_bulk_retry_needs_a_confirmation_and_a_queue_and_takes_only_matches(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    matching = [await fail_one(backend, queue_name, "charge", {"tenant": "a"}) for _ in range(3)]
    other = await fail_one(backend, queue_name, "charge", {"tenant": "b"})
    query = f"queue:{queue_name} data.tenant:a"
    response = await browser.post("retry-failed", q=query)  # not confirmed
    assert "error=" in response.headers["location"]
    response = await browser.post("retry-failed", q="data.tenant:a", confirmed="yes")
    assert "needs+a+queue" in response.headers["location"]
    assert await backend.get_job_counts(queue_name, ["failed"]) == {"failed": 4}
    await browser.post("retry-failed", q=query, confirmed="yes")
    for job_id in matching:
        assert await backend.get_job_state(queue_name, job_id) == "waiting"
    assert await backend.get_job_state(queue_name, other) == "failed"
    [event] = [e for e in await backend.read_events(queue_name) if e.event == "action"]
    assert event.data["count"] == 3 and event.data["action"] == "retry-failed"


async def test_bulk_remove_stops_at_the_cap(
    backend: JobQueueBackend, browser: Browser, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lane_pg.dashboard.app.BULK_CAP", 2)
    for _ in range(3):
        await fail_one(backend, queue_name)
    response = await browser.post("remove-failed", q=f"queue:{queue_name}", confirmed="yes")
    assert "cap" in response.headers["location"]
    assert await backend.get_job_counts(queue_name, ["failed"]) == {"failed": 1}


async def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    backend: JobQueueBackend, browser: Browser, make_browser: MakeBrowser, queue_name: str
) -> None:
    await backend.add_jobs(queue_name, [JobSpec("x")])
    await browser.post("pause", status=403, queue=queue_name, csrf="0" * 64)
    # A token of another session (another browser) is no good here either.
    other = make_browser()
    token = await other.csrf()
    await browser.csrf()
    await browser.post("pause", status=403, queue=queue_name, csrf=token)
    assert not await backend.is_queue_paused(queue_name)


async def test_a_read_only_viewer_sees_no_action_and_a_forged_post_is_403(
    backend: JobQueueBackend, make_browser: MakeBrowser, queue_name: str
) -> None:
    job_id = await fail_one(backend, queue_name)
    viewer = make_browser(access=lambda connection: read_only("viewer"))
    for path in (
        "/",
        f"/queues/{queue_name}",
        f"/jobs?state=failed&q=queue:{queue_name}",
        f"/queues/{queue_name}/jobs/{job_id}",
    ):
        html = await viewer.page(path)
        assert "data-action=" not in html and 'id="read-only"' in html, path
    await viewer.post("pause", status=403, queue=queue_name)
    await viewer.post("retry", status=403, queue=queue_name, job_id=job_id)
    assert not await backend.is_queue_paused(queue_name)
    assert await backend.get_job_state(queue_name, job_id) == "failed"


async def test_basic_auth_from_the_environment(
    backend: JobQueueBackend, make_browser: MakeBrowser, queue_name: str
) -> None:
    access = environment_access(
        {"LANE_PG_DASHBOARD_AUTH": "admin:s3cret", "LANE_PG_DASHBOARD_READONLY_AUTH": "ro:pw"}
    )
    browser = make_browser(access=access)
    response = await browser.client.get("/")
    assert response.status_code == 401 and "Basic" in response.headers["www-authenticate"]

    def auth(user: str, password: str) -> dict[str, str]:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    assert (await browser.client.get("/", headers=auth("admin", "wrong"))).status_code == 401
    assert (await browser.client.get("/", headers=auth("admin", "s3cret"))).status_code == 200
    html = (await browser.client.get("/", headers=auth("ro", "pw"))).text
    assert 'id="read-only"' in html
    with pytest.raises(ValueError, match="user:password"):
        environment_access({"LANE_PG_DASHBOARD_AUTH": "nocolon"})


async def test_the_overview_api_and_the_queue_page(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    [job] = await backend.add_jobs(queue_name, [JobSpec("x")])
    [claimed] = await backend.claim_jobs("w1", [QueueDemand(queue_name, 1)], 30)
    assert claimed.lock_token is not None
    await backend.complete_jobs([Completion(queue_name, job.id, claimed.lock_token)])
    snapshot = (await browser.client.get("/api/overview")).json()
    assert snapshot["queues"][queue_name]["counts"]["completed"] == 1
    html = await browser.page(f"/queues/{queue_name}")
    assert "<rect" in html and 'class="done"' in html  # this minute's bar
    await browser.page("/queues/no_such_queue_here", status=404)
    assert "No batch" in await browser.page("/batches") or "<table" in await browser.page(
        "/batches"
    )
    await browser.page("/repeats")


async def test_mounted_under_a_prefix_in_another_app_its_links_and_redirects_keep_it(
    backend: JobQueueBackend, queue_name: str
) -> None:
    import httpx
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from lane_pg.dashboard import create_app, full_access

    dashboard = create_app(backend, access=lambda connection: full_access("ops"))
    host = Starlette(routes=[Mount("/admin/queues", app=dashboard)])
    await backend.add_jobs(queue_name, [JobSpec("x")])
    transport = httpx.ASGITransport(app=host)
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
        html = (await client.get("/admin/queues/")).text
        assert f'href="/admin/queues/queues/{queue_name}"' in html
        assert 'src="/admin/queues/static/dashboard.js"' in html
        assert (await client.get("/admin/queues/static/dashboard.css")).status_code == 200
        token = re.search(r'data-csrf="([0-9a-f]+)"', html)
        assert token is not None
        response = await client.post(
            "/admin/queues/actions/pause",
            data={"csrf": token.group(1), "queue": queue_name, "back": f"/queues/{queue_name}"},
        )
        assert response.status_code == 303
        assert response.headers["location"].startswith(f"/admin/queues/queues/{queue_name}?")
        assert await backend.is_queue_paused(queue_name)
    await dashboard.state.dashboard.close()


async def test_cancelling_a_batch_is_recorded_on_its_queue(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    import uuid

    from lane_pg.types import QueuedSpec

    batch_id = str(uuid.uuid4())
    await backend.batches.add_batch(
        batch_id, "import", [QueuedSpec(queue_name, "row", {"n": n}) for n in range(2)]
    )
    html = await browser.page("/batches?state=pending")
    assert f'<tr id="{batch_id}">' in html and 'data-action="cancel-batch"' in html
    await browser.post("cancel-batch", batch_id=batch_id, back="/batches")
    batch = await backend.batches.find_batch(batch_id)
    assert batch is not None and batch.cancelled_at is not None
    [event] = [e for e in await backend.read_events(queue_name) if e.event == "action"]
    assert event.data == {"action": "cancel-batch", "actor": "tester", "batch_id": batch_id}


async def test_jobs_removed_on_completion_still_count_in_the_charts(
    backend: JobQueueBackend, browser: Browser, queue_name: str
) -> None:
    specs = [JobSpec("x", None, {"remove_on_complete": True})] * 3
    await backend.add_jobs(queue_name, specs)
    claimed = await backend.claim_jobs("w1", [QueueDemand(queue_name, 3)], 30)
    await backend.complete_jobs(
        [Completion(queue_name, job.id, job.lock_token or "") for job in claimed]
    )
    assert await backend.get_job_counts(queue_name, ["completed"]) == {"completed": 0}
    html = await browser.page(f"/queues/{queue_name}")
    assert "3 completed, 0 failed" in html  # this minute's bar, from the terminal metrics
    assert "0.6 jobs finished per minute" in html
