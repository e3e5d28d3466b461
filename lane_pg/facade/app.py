"""``App``: connection settings, processors by job name, and the way to run a worker.

app = lane_pg.App()                      # DSN: argument, else $LANE_PG_DSN, else embedded

@app.processor("send_email")
async def send_email(job, ctx):
    ...
    return {"sent": True}

python -m lane_pg worker --app myapp.jobs:app     # a worker process, or from code:
await app.run_worker(burst=True)                  # (lane_pg.facade.workers makes it)

Job classes registered with ``lane_pg.register_job`` run on the same worker, beside the
processor functions (``App(jobs=...)`` picks another registry than the default one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, overload

from lane_pg.backend import JobQueueBackend, backend_kind, connect, resolve_url
from lane_pg.backend.url import validate_schema
from lane_pg.errors import ConfigurationError
from lane_pg.facade import DEFAULT_REGISTRY, BackendDriver, JobRegistry, QueueFacade
from lane_pg.facade.failed import bind_default_failed_store
from lane_pg.facade.failover_worker import FailoverWorker
from lane_pg.facade.workers import WorkerSpec, run_started, start_worker
from lane_pg.types import JSON, JobOptions, JobRow, Lane
from lane_pg.worker import Processor, ProcessorLike, Worker, WorkerConfig, WorkerHooks


class App:
    """A registry of processors (a router by job name) plus connection settings."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = "lane",
        lanes: Sequence[Lane] = (),
        jobs: JobRegistry | None = DEFAULT_REGISTRY,
        connection: str | None = None,
    ) -> None:
        if dsn:
            backend_kind(dsn)  # a URL no backend opens is refused now, not at first use
        self._dsn = dsn
        self.schema = validate_schema(schema)
        self.lanes = tuple(lanes)
        self.jobs = jobs
        """The job classes this app's workers run (None: processor functions only)."""
        self.connection = connection
        """The facade connection name this app's workers carry on events (CONN-13); None:
        the backend's kind (``postgres``, ``memory``)."""
        self._processors: dict[str, Processor] = {}
        self._backend: JobQueueBackend | None = None
        self._lock = asyncio.Lock()

    @property
    def processors(self) -> Mapping[str, Processor]:
        return dict(self._processors)

    def processor(self, name: str) -> Callable[[Processor], Processor]:
        """Register ``async def handler(job, ctx)`` for jobs named ``name``."""
        if not name:
            raise ConfigurationError("a processor needs a job name")

        def register(function: Processor) -> Processor:
            if name in self._processors:
                raise ConfigurationError(f"a processor for {name!r} is already registered")
            self._processors[name] = function
            return function

        return register

    def worker_spec(self, facade: QueueFacade | None = None) -> WorkerSpec:
        """What this app's workers run: its processor functions, the job classes of its
        registry and its lanes, on ``facade`` (``lane_pg.Q`` unless given)."""
        from lane_pg.facade import Q

        return WorkerSpec(facade or Q, self.jobs, dict(self._processors), self.lanes)

    def all_processors(
        self, facade: QueueFacade | None = None, *, connection: str | None = None
    ) -> dict[str, ProcessorLike]:
        """The processor functions and a processor per registered job class, by job name;
        one name served twice is refused. ``connection``: the label the job classes' events
        carry (default ``connection_label()``)."""
        return self.worker_spec(facade).processors(connection or self.connection_label())

    def served_lanes(
        self, facade: QueueFacade | None = None, *, connection: str | None = None
    ) -> tuple[Lane, ...]:
        """The lanes a worker of this app serves when none are given: the app's lanes, a
        lane for each registered job class's queue, and their forward destinations
        (``lane_pg.facade.serving``); empty when nothing names a queue."""
        return self.worker_spec(facade).served_lanes(connection or self.connection_label())

    def connection_label(self) -> str:
        """The connection name: the one given, else the driver's name the facade's
        bootstrap uses for this backend (``postgres``, ``memory``)."""
        return self.connection or backend_kind(self.resolve_dsn())

    async def bind(self, facade: QueueFacade | None = None) -> QueueFacade:
        """Make this app's backend the default connection of ``facade`` (``lane_pg.Q``
        unless given), so ``Q.push`` writes where this app's workers claim."""
        from lane_pg.facade import Q

        facade = facade or Q
        backend = await self.backend()
        driver = BackendDriver(backend, backend_kind(self.resolve_dsn()))
        facade.set_driver(driver, name=self.connection)
        bind_default_failed_store(facade, backend)  # FAIL-8, when none is bound
        return facade

    def resolve_dsn(self) -> str:
        """The DSN given, else ``$LANE_PG_DSN``, else the embedded server in ./.lane_pg."""
        if not self._dsn:
            self._dsn = resolve_url(None)
        return self._dsn

    async def backend(self) -> JobQueueBackend:
        """The app's backend, opened on first use by ``lane_pg.backend.connect`` (for
        PostgreSQL the schema version is checked)."""
        async with self._lock:
            if self._backend is None:
                self._backend = await connect(self.resolve_dsn(), schema=self.schema)
            return self._backend

    async def add_job(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
    ) -> JobRow:
        """Enqueue one job (outside any transaction of yours; see
        ``lane_pg.add_job`` to enqueue inside one)."""
        return await (await self.backend()).jobs.add_job(queue, name, data, options)

    @overload
    async def create_worker(
        self,
        config: WorkerConfig | None = None,
        *,
        hooks: WorkerHooks | None = None,
        connection: None = None,
        facade: QueueFacade | None = None,
        **settings: Any,
    ) -> Worker: ...

    @overload
    async def create_worker(
        self,
        config: WorkerConfig | None = None,
        *,
        hooks: WorkerHooks | Callable[[str], WorkerHooks | None] | None = None,
        connection: str,
        facade: QueueFacade | None = None,
        **settings: Any,
    ) -> Worker | FailoverWorker: ...

    async def create_worker(
        self,
        config: WorkerConfig | None = None,
        *,
        hooks: WorkerHooks | Callable[[str], WorkerHooks | None] | None = None,
        connection: str | None = None,
        facade: QueueFacade | None = None,
        **settings: Any,
    ) -> Worker | FailoverWorker:
        """A worker for this app's processors, woken early by the backend when it can
        (PostgreSQL: a LISTEN connection for its queues; other backends poll); ``run_worker``
        makes and runs one.

        ``settings`` are ``WorkerConfig`` fields. Without lanes (and without
        ``all_queues=True``) the worker serves ``served_lanes()``: the app's lanes, its job
        classes' queues and their forwards; ``ConfigurationError`` when those name none.
        ``connection`` names a connection of ``facade`` (``lane_pg.Q`` unless given) to work
        on instead of the app's own database (a failover connection gets a
        ``FailoverWorker``: one worker per connection of its list); ``hooks`` may then be a
        function of each one's label. The facade's job classes' events and failed-job
        store are the worker's.
        """
        if config is None:
            config = WorkerConfig(**settings)
        elif settings:
            raise ConfigurationError("give either a WorkerConfig or settings, not both")
        spec = self.worker_spec(facade)
        per_label: Callable[[str], WorkerHooks | None] | None
        if hooks is None or isinstance(hooks, WorkerHooks):
            given = hooks
            per_label = None if given is None else (lambda _label: given)
        else:
            per_label = hooks
        if connection is not None:
            source = spec.facade.connection(connection)
            return await start_worker(spec, source, config, connection, per_label)
        label = self.connection_label()
        config = spec.configured(config, label)  # before the database is opened
        return await start_worker(spec, await self.backend(), config, label, per_label)

    @overload
    async def run_worker(
        self,
        config: WorkerConfig | None = None,
        *,
        shutdown: asyncio.Event | None = None,
        connection: None = None,
        facade: QueueFacade | None = None,
        **settings: Any,
    ) -> Worker: ...

    @overload
    async def run_worker(
        self,
        config: WorkerConfig | None = None,
        *,
        shutdown: asyncio.Event | None = None,
        connection: str,
        facade: QueueFacade | None = None,
        **settings: Any,
    ) -> Worker | FailoverWorker: ...

    async def run_worker(
        self,
        config: WorkerConfig | None = None,
        *,
        shutdown: asyncio.Event | None = None,
        connection: str | None = None,
        facade: QueueFacade | None = None,
        **settings: Any,
    ) -> Worker | FailoverWorker:
        """Run a worker until it stops: ``shutdown`` set (at its next claim boundary,
        running jobs finishing within ``shutdown_timeout``), ``worker.stop()``, or idle in
        burst mode; returns it. The one documented way to run a worker from code
        (``create_worker`` for its arguments)."""
        if connection is None:
            worker: Worker | FailoverWorker = await self.create_worker(
                config, facade=facade, **settings
            )
        else:
            worker = await self.create_worker(
                config, connection=connection, facade=facade, **settings
            )
        return await run_started(worker, shutdown)

    async def close(self) -> None:
        if self._backend is not None:
            await self._backend.close()
            self._backend = None
