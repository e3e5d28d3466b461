"""The dashboard as an ASGI application (Starlette and Jinja2: ``pip install
'lane_pg[web]'``).

    from lane_pg.dashboard import create_app
    app = create_app("postgresql://localhost/app")      # serve it with any ASGI server
    # or inside a Starlette / FastAPI app:  Mount("/queues", app=create_app(backend))

Pages are rendered on the server; the one script of the project's own
(``static/dashboard.js``) keeps counts live over server-sent events (``/api/stream``),
falls back to polling ``/api/overview`` when the stream fails, and asks before a bulk
action. Every action is a POST carrying the page's CSRF token, is checked against the
viewer's ``Grant``, is recorded as an ``action`` event of its queue (actor and
details), and is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import inspect
import json
import logging
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from lane_pg.backend import JobQueueBackend, connect
from lane_pg.dashboard import reads
from lane_pg.dashboard.access import ACTIONS, AccessHook, Grant, environment_access
from lane_pg.dashboard.live import END, LiveHub
from lane_pg.dashboard.search import JobSearch, SearchError, format_search, parse_search
from lane_pg.errors import LaneError
from lane_pg.inspection import job_document
from lane_pg.types import ALL_STATES, JSON, JobRateLimit, JobRow, JobState
from lane_pg.types.workers import workers_per_queue

logger = logging.getLogger("lane_pg.dashboard")

HERE = Path(__file__).parent
SESSION_COOKIE = "lane_pg_dashboard"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
BULK_CAP = 1000
"""The most jobs one bulk retry or remove changes; a larger set takes several clicks."""

DataFormatter = Callable[[JobRow, str, JSON], JSON]
"""``formatter(job, field, value)``: what to show of ``job``'s ``field`` (``data``,
``return_value``, ``progress``), e.g. with secrets masked."""


class Dashboard:
    """The dashboard's state: its backend, access hook, data display and live hub."""

    def __init__(
        self,
        backend: JobQueueBackend | str | None,
        *,
        access: AccessHook | None,
        hide_data: bool,
        format_data: DataFormatter | None,
        poll_interval: float,
        secret: bytes | None,
    ) -> None:
        self._given = backend if isinstance(backend, JobQueueBackend) else None
        self._url = None if isinstance(backend, JobQueueBackend) else backend
        self._backend: JobQueueBackend | None = self._given
        self._lock = asyncio.Lock()
        self.access = access if access is not None else environment_access()
        self.hide_data = hide_data
        self.format_data = format_data
        self.secret = secret if secret is not None else _secret_from_environment()
        self.live = LiveHub(self.backend, reads.overview_snapshot, poll_interval)
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(["html"]),
            enable_async=False,
        )
        _filters(self.templates)

    async def backend(self) -> JobQueueBackend:
        """The backend, connected on first use (a mounted app gets no lifespan events)."""
        if self._backend is None:
            async with self._lock:
                if self._backend is None:
                    self._backend = await connect(self._url)
        return self._backend

    async def close(self) -> None:
        await self.live.close()
        if self._backend is not None and self._given is None:
            await self._backend.close()
            self._backend = None

    # -------------------------------------------------------------- access and CSRF

    async def grant(self, connection: HTTPConnection) -> Grant | None:
        decided = self.access(connection)
        if inspect.isawaitable(decided):
            decided = await decided
        return decided

    def csrf_token(self, session: str) -> str:
        return hmac.new(self.secret, session.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, request: Request, given: str | None) -> bool:
        session = request.cookies.get(SESSION_COOKIE)
        if not session or not given:
            return False
        return hmac.compare_digest(self.csrf_token(session), given)

    # ----------------------------------------------------------------------- display

    def shown(self, job: JobRow, field: str, value: JSON) -> dict[str, Any]:
        if self.hide_data:
            return {"hidden": True, "text": "", "cut_from": None}
        if self.format_data is not None:
            value = self.format_data(job, field, value)
        text, cut_from = reads.shown_json(value)
        return {"hidden": False, "text": text, "cut_from": cut_from}

    def preview(self, job: JobRow, width: int = 80) -> str:
        """The job's data on one line, cut to ``width`` (the jobs list)."""
        if self.hide_data:
            return "hidden"
        value = job.data if self.format_data is None else self.format_data(job, "data", job.data)
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        return text if len(text) <= width else text[: width - 1] + "…"


def _secret_from_environment() -> bytes:
    given = os.environ.get("LANE_PG_DASHBOARD_SECRET")
    # Random per process when unset: tokens then last as long as the process.
    return given.encode() if given else secrets.token_bytes(32)


# ------------------------------------------------------------------------------ pages


def _render(
    dashboard: Dashboard, request: Request, grant: Grant, name: str, status: int = 200, **ctx: Any
) -> HTMLResponse:
    session = request.cookies.get(SESSION_COOKIE) or secrets.token_urlsafe(32)
    template = dashboard.templates.get_template(name)
    html = template.render(
        request=request,
        base=request.scope.get("root_path", "").rstrip("/"),
        grant=grant,
        csrf=dashboard.csrf_token(session),
        notice=request.query_params.get("notice"),
        error=request.query_params.get("error"),
        states=ALL_STATES,
        hide_data=dashboard.hide_data,
        now=datetime.now(UTC),
        **ctx,
    )
    response = HTMLResponse(html, status_code=status)
    if SESSION_COOKIE not in request.cookies:
        response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict", path="/")
    return response


async def overview(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    backend = await dashboard.backend()
    workers = await reads.live_workers(backend)
    rows = await reads.queue_rows(backend, workers)
    per_queue = [await reads.last_hour(backend, row.name) for row in rows]
    recents = {
        row.name: reads.recent(minutes) for row, minutes in zip(rows, per_queue, strict=True)
    }
    totals = {state: sum(row.counts.get(state, 0) for row in rows) for state in ALL_STATES}
    return _render(
        dashboard,
        request,
        grant,
        "overview.html",
        rows=rows,
        recents=recents,
        totals=totals,
        workers=workers,
        throughput=reads.chart_of(reads.summed(per_queue)),
    )


async def queue_page(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    backend = await dashboard.backend()
    queue = request.path_params["queue"]
    if queue not in await backend.queues.list_queues():
        return _render(dashboard, request, grant, "missing.html", 404, what=f"queue {queue}")
    stats = await backend.reads.get_queue_stats(queue)
    workers = await reads.live_workers(backend)
    minutes = await reads.last_hour(backend, queue)
    repeats = await backend.repeats.list_repeats(queue, 0, 99)
    return _render(
        dashboard,
        request,
        grant,
        "queue.html",
        queue=queue,
        stats=stats,
        counts={str(k): v for k, v in stats.counts.items()},
        workers=workers_per_queue(workers, [queue])[queue],
        rate_limit=await backend.limits.get_claim_rate_limit(queue),
        max_active=await backend.limits.get_max_active_jobs(queue),
        throughput=reads.chart_of(minutes),
        recent=reads.recent(minutes),
        schedules=[(queue, info) for info in repeats],
    )


async def jobs_page(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    backend = await dashboard.backend()
    params = request.query_params
    text = params.get("q", "")
    error: str | None = None
    try:
        search = parse_search(text)
        if search.data_path is not None and dashboard.hide_data:
            raise SearchError("searching job data is off: this dashboard hides job data")
    except SearchError as exc:
        search, error = JobSearch(), str(exc)
    state: JobState = search.state or _state(params.get("state")) or "failed"
    offset = max(0, _int(params.get("offset"), 0))
    queues = sorted(await backend.queues.list_queues())
    if search.queue is not None:
        queues = [search.queue] if search.queue in queues else []
    jobs: list[JobRow] = []
    more = False
    if error is None and queues:
        try:
            jobs, more = await reads.search_jobs(backend, queues, state, search, offset)
        except LaneError as exc:
            error = str(exc)
    counts = None
    if search.queue is not None and search.queue in queues:
        counts = {str(k): v for k, v in (await backend.reads.get_job_counts(search.queue)).items()}
    return _render(
        dashboard,
        request,
        grant,
        "jobs.html",
        q=text,
        search=search,
        search_error=error,
        state=state,
        jobs=jobs,
        more=more,
        offset=offset,
        page_size=reads.PAGE_SIZE,
        counts=counts,
        bulk_cap=BULK_CAP,
        preview=dashboard.preview,
        query_for=lambda **changes: _query(
            {"q": text, "state": state, "offset": str(offset)}, changes
        ),
    )


async def job_page(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    backend = await dashboard.backend()
    queue, job_id = request.path_params["queue"], request.path_params["job_id"]
    document = await job_document(backend, queue, job_id, log_count=50, event_count=50)
    if document is None:
        return _render(dashboard, request, grant, "missing.html", 404, what=f"job {job_id}")
    job = await backend.jobs.get_job(queue, job_id)
    assert job is not None
    return _render(
        dashboard,
        request,
        grant,
        "job.html",
        job=job,
        doc=document,
        data=dashboard.shown(job, "data", job.data),
        result=dashboard.shown(job, "return_value", job.return_value),
        progress=dashboard.shown(job, "progress", job.progress),
        shown_json=lambda value: reads.shown_json(value)[0],
    )


async def batches_page(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    backend = await dashboard.backend()
    state = request.query_params.get("state") or None
    if state not in (None, "pending", "finished", "cancelled"):
        state = None
    batches = await backend.batches.list_batches(100, state)
    return _render(dashboard, request, grant, "batches.html", batches=batches, state=state)


async def repeats_page(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    backend = await dashboard.backend()
    schedules = []
    for queue in sorted(await backend.queues.list_queues()):
        for info in await backend.repeats.list_repeats(queue, 0, 199):
            schedules.append((queue, info))
    return _render(dashboard, request, grant, "repeats.html", schedules=schedules)


async def api_overview(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    return JSONResponse(await reads.overview_snapshot(await dashboard.backend()))


async def api_stream(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    async def events() -> AsyncIterator[str]:
        async with dashboard.live.listen() as inbox:
            yield "retry: 3000\n\n"
            while True:
                try:
                    text = await asyncio.wait_for(inbox.get(), timeout=15.0)
                except TimeoutError:
                    yield ": keep-alive\n\n"  # proxies close idle streams
                    continue
                if text == END:  # the server is stopping (LiveHub.end_streams)
                    return
                yield f"event: overview\ndata: {text}\n\n"

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def prometheus_metrics(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    try:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        from lane_pg.worker.prometheus import QueueCollector, new_registry

        registry = new_registry()
    except ImportError:
        return PlainTextResponse(
            "/metrics needs prometheus_client: pip install 'lane_pg[prometheus]'\n",
            status_code=404,
        )
    registry.register(QueueCollector(await dashboard.backend(), asyncio.get_running_loop()))
    # The collector runs the reads on this loop from the exporter's thread.
    body = await asyncio.to_thread(generate_latest, registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


# ---------------------------------------------------------------------------- actions


class ActionRefused(Exception):
    """An action's input is wrong: shown to the viewer, nothing changed."""


async def act(dashboard: Dashboard, request: Request, grant: Grant) -> Response:
    """Every POST: CSRF check, grant check, the action, its event and its log line."""
    form = await request.form()
    token = request.headers.get(CSRF_HEADER) or _text(form.get(CSRF_FIELD))
    if not dashboard.csrf_ok(request, token):
        return PlainTextResponse("missing or wrong CSRF token: reload the page\n", 403)
    action = request.path_params["action"]
    kind = ACTION_KINDS.get(action)
    if kind is None:
        return PlainTextResponse(f"unknown action {action!r}\n", 404)
    if not grant.allows(kind):
        logger.warning("dashboard: %s was refused %s", grant.user or "a viewer", action)
        return PlainTextResponse(f"not allowed: {action}\n", 403)
    fields = {key: _text(value) or "" for key, value in form.items() if key != CSRF_FIELD}
    back = fields.pop("back", "") or "/"
    if not back.startswith("/") or back.startswith("//"):
        back = "/"  # only back into this dashboard
    backend = await dashboard.backend()
    try:
        queue, job_id, details, notice = await ACTION_HANDLERS[action](backend, fields)
    except (ActionRefused, LaneError, ValueError) as exc:
        logger.warning("dashboard: %s: %s failed: %s", grant.user or "anonymous", action, exc)
        return _redirect(request, back, error=f"{action}: {exc}")
    if queue is not None:
        try:
            await backend.events.record_action(
                queue, action, actor=grant.user, job_id=job_id, details=details
            )
        except LaneError as exc:  # the action happened: say the audit row did not
            logger.error("dashboard: %s done, but its event was not recorded: %s", action, exc)
    logger.info(
        "dashboard: %s did %s on %s%s %s",
        grant.user or "anonymous",
        action,
        queue,
        "" if job_id is None else f" job {job_id}",
        details,
    )
    return _redirect(request, back, notice=notice)


Outcome = tuple[str | None, str | None, dict[str, JSON], str]
"""What an action did: its queue, its job, the details its event records, the notice."""


def _need(fields: dict[str, str], name: str) -> str:
    value = fields.get(name, "").strip()
    if not value:
        raise ActionRefused(f"{name} is missing")
    return value


async def _pause(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    queue = _need(fields, "queue")
    await backend.queues.pause_queue(queue)
    return queue, None, {}, f"queue {queue} paused: workers stop claiming its jobs"


async def _resume(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    queue = _need(fields, "queue")
    await backend.queues.resume_queue(queue)
    return queue, None, {}, f"queue {queue} resumed"


async def _rate_limit(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    queue = _need(fields, "queue")
    if fields.get("clear"):
        await backend.limits.clear_claim_rate_limit(queue)
        return queue, None, {"cleared": True}, f"queue {queue}: rate limit cleared"
    maximum = _positive(fields.get("max"), "max")
    duration_ms = _positive(fields.get("duration_ms"), "duration_ms")
    await backend.limits.set_claim_rate_limit(
        queue, JobRateLimit(maximum, timedelta(milliseconds=duration_ms))
    )
    details: dict[str, JSON] = {"max": maximum, "duration_ms": duration_ms}
    return queue, None, details, f"queue {queue}: at most {maximum} jobs per {duration_ms} ms"


async def _max_active(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    queue = _need(fields, "queue")
    if fields.get("clear"):
        await backend.limits.clear_max_active_jobs(queue)
        return queue, None, {"cleared": True}, f"queue {queue}: max-active bound cleared"
    value = _positive(fields.get("max_active"), "max_active")
    await backend.limits.set_max_active_jobs(queue, value)
    return queue, None, {"max_active": value}, f"queue {queue}: at most {value} jobs at once"


async def _job_action(backend: JobQueueBackend, fields: dict[str, str], verb: str) -> Outcome:
    queue, job_id = _need(fields, "queue"), _need(fields, "job_id")
    if verb == "retry":
        await backend.jobs.retry_job(queue, job_id)
    elif verb == "promote":
        await backend.jobs.promote_job(queue, job_id)
    elif not await backend.jobs.remove_job(queue, job_id):
        raise ActionRefused(f"job {job_id} was not removed (gone, or active)")
    past = {"retry": "retried", "promote": "promoted", "remove": "removed"}[verb]
    return queue, job_id, {}, f"job {job_id} {past}"


async def _retry(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    return await _job_action(backend, fields, "retry")


async def _promote(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    return await _job_action(backend, fields, "promote")


async def _remove(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    return await _job_action(backend, fields, "remove")


async def _bulk(backend: JobQueueBackend, fields: dict[str, str], verb: str) -> Outcome:
    """Retry or remove every failed job of one queue matching the search, at most
    ``BULK_CAP``, after the viewer confirmed."""
    if fields.get("confirmed") != "yes":
        raise ActionRefused("confirm the bulk action first (tick the box)")
    search = parse_search(fields.get("q", ""))
    if search.queue is None:
        raise ActionRefused("a bulk action needs a queue: add queue:NAME to the search")
    queue = search.queue
    done = 0
    skipped: set[str] = set()
    while done < BULK_CAP:
        jobs, _ = await reads.search_jobs(
            backend, [queue], "failed", search, len(skipped), min(500, BULK_CAP - done)
        )
        if not jobs:
            break
        for job in jobs:
            try:
                if verb == "retry":
                    await backend.jobs.retry_job(queue, job.id)
                elif not await backend.jobs.remove_job(queue, job.id):
                    skipped.add(job.id)
                    continue
            except LaneError:  # changed since it was read: leave it, go on
                skipped.add(job.id)
                continue
            done += 1
    past = "retried" if verb == "retry" else "removed"
    details: dict[str, JSON] = {"search": format_search(search), "count": done}
    note = f"{done} failed job(s) of {queue} {past}"
    if done >= BULK_CAP:
        note += f" (the cap of {BULK_CAP}: run it again for more)"
    return queue, None, details, note


async def _retry_failed(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    return await _bulk(backend, fields, "retry")


async def _remove_failed(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    return await _bulk(backend, fields, "remove")


async def _cancel_batch(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    batch_id = _need(fields, "batch_id")
    batch = await backend.batches.find_batch(batch_id)
    if batch is None:
        raise ActionRefused(f"no batch {batch_id}")
    if not await backend.batches.cancel_batch(batch_id):
        raise ActionRefused(f"batch {batch_id} was not cancelled (finished or cancelled)")
    # Its event goes to the callback queue (stored on every batch: the first job's
    # queue unless the batch named one).
    queue = batch.options.get("callback_queue")
    return (
        queue if isinstance(queue, str) else None,
        None,
        {"batch_id": batch_id},
        f"batch {batch.name or batch_id} cancelled",
    )


async def _remove_repeat(backend: JobQueueBackend, fields: dict[str, str]) -> Outcome:
    queue, key = _need(fields, "queue"), _need(fields, "key")
    if await backend.repeats.remove_repeat(queue, key) is None:
        raise ActionRefused(f"no repeat schedule {key} in {queue}")
    return queue, None, {"key": key}, f"repeat schedule {key} removed"


ACTION_HANDLERS: dict[str, Callable[[JobQueueBackend, dict[str, str]], Awaitable[Outcome]]] = {
    "pause": _pause,
    "resume": _resume,
    "rate-limit": _rate_limit,
    "max-active": _max_active,
    "retry": _retry,
    "promote": _promote,
    "remove": _remove,
    "retry-failed": _retry_failed,
    "remove-failed": _remove_failed,
    "cancel-batch": _cancel_batch,
    "remove-repeat": _remove_repeat,
}
ACTION_KINDS: dict[str, str] = {
    "pause": "pause",
    "resume": "pause",
    "rate-limit": "limits",
    "max-active": "limits",
    "retry": "retry",
    "promote": "promote",
    "remove": "remove",
    "retry-failed": "retry",
    "remove-failed": "remove",
    "cancel-batch": "cancel_batch",
    "remove-repeat": "remove_repeat",
}
"""The ``Grant`` action each POST needs (``access.ACTIONS``)."""
assert set(ACTION_KINDS.values()) <= ACTIONS and ACTION_KINDS.keys() == ACTION_HANDLERS.keys()


# ----------------------------------------------------------------------------- helpers


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default


def _positive(text: str | None, name: str) -> int:
    try:
        value = int(text or "")
    except ValueError:
        raise ActionRefused(f"{name} must be a whole number, got {text!r}") from None
    if value < 1:
        raise ActionRefused(f"{name} must be at least 1, got {value}")
    return value


def _state(text: str | None) -> JobState | None:
    for state in ALL_STATES:
        if state == text:
            return state
    return None


def _query(current: dict[str, str], changes: dict[str, Any]) -> str:
    merged = {**current, **{k: str(v) for k, v in changes.items()}}
    return urlencode({k: v for k, v in merged.items() if v not in ("", "0") or k == "q"})


def _redirect(request: Request, back: str, **message: str) -> RedirectResponse:
    base = request.scope.get("root_path", "").rstrip("/")
    path, _, query = back.partition("?")
    kept = [
        part for part in query.split("&") if part and not part.startswith(("notice=", "error="))
    ]
    kept.append(urlencode(message))
    return RedirectResponse(f"{base}{path}?{'&'.join(kept)}", status_code=303)


# ----------------------------------------------------------------------------- the app

Handler = Callable[[Dashboard, Request, Grant], Awaitable[Response]]


def _guarded(dashboard: Dashboard, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        grant = await dashboard.grant(request)
        if grant is None:
            return PlainTextResponse(
                "authentication required\n",
                401,
                headers={"WWW-Authenticate": 'Basic realm="lane_pg dashboard"'},
            )
        return await handler(dashboard, request, grant)

    return endpoint


def create_app(
    backend: JobQueueBackend | str | None = None,
    *,
    access: AccessHook | None = None,
    hide_data: bool = False,
    format_data: DataFormatter | None = None,
    poll_interval: float = 2.0,
    secret: bytes | None = None,
) -> Starlette:
    """The dashboard as an ASGI app over ``backend``: a connected backend (kept open: the
    caller closes it) or a URL (None: ``LANE_PG_DSN``; connected on first request,
    closed at the app's shutdown).

    ``access`` decides each request (default: ``environment_access()``, basic auth from
    the environment); ``hide_data`` shows no job data, result or progress and turns the
    data search off (payloads holding secrets); ``format_data`` rewrites what is shown
    of them; ``poll_interval`` is how often live pages re-read counts without a wake-up;
    ``secret`` signs CSRF tokens (default: ``LANE_PG_DASHBOARD_SECRET``, else random
    per process)."""
    if not 0 < poll_interval <= 60:
        raise ValueError(f"poll_interval must be in (0, 60] seconds, got {poll_interval!r}")
    dashboard = Dashboard(
        backend,
        access=access,
        hide_data=hide_data,
        format_data=format_data,
        poll_interval=poll_interval,
        secret=secret,
    )
    pages: list[tuple[str, Handler, list[str]]] = [
        ("/", overview, ["GET"]),
        ("/queues/{queue}", queue_page, ["GET"]),
        ("/jobs", jobs_page, ["GET"]),
        ("/queues/{queue}/jobs/{job_id}", job_page, ["GET"]),
        ("/batches", batches_page, ["GET"]),
        ("/repeats", repeats_page, ["GET"]),
        ("/api/overview", api_overview, ["GET"]),
        ("/api/stream", api_stream, ["GET"]),
        ("/metrics", prometheus_metrics, ["GET"]),
        ("/actions/{action}", act, ["POST"]),
    ]
    routes: list[Route | Mount] = [
        Route(path, _guarded(dashboard, handler), methods=methods)
        for path, handler, methods in pages
    ]
    routes.append(Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await dashboard.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.dashboard = dashboard
    return app


def since(moment: datetime | None, now: datetime) -> str:
    """``moment`` as an age ("3s", "4m", "2h", "5d") for the templates."""
    if moment is None:
        return "-"
    seconds = (now - moment).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _filters(environment: Environment) -> None:
    environment.filters["since"] = since
    environment.filters["ms"] = lambda v: "-" if v is None else f"{v:,.0f} ms"
    environment.filters["iso"] = lambda v: (
        "-" if v is None else v.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    )
    environment.filters["duration"] = lambda ms: str(timedelta(milliseconds=ms))
