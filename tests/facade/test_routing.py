"""Routes, forwards and connection names (ROUTE-1..10, CONN-4..8, CONN-15)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError, InvalidQueueName
from lane_pg.facade import (
    BackendDriver,
    EnvelopeOverrides,
    Job,
    JobQueued,
    JobRegistry,
    QueueFacade,
    bootstrap_default,
    bootstrap_from_env,
)
from lane_pg.memory import MemoryBackend


@dataclass
class Report(Job):
    job_name = "Report"
    queue = "reports"
    connection = "analytics"
    n: int = 0


@dataclass
class Mail(Job):
    job_name = "Mail"
    n: int = 0


def _facade() -> QueueFacade:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(MemoryBackend(), "memory"))
    return facade


def test_precedence_override_route_declaration_default_ROUTE_2_CONN_8() -> None:
    facade = _facade()
    assert (facade.envelope(Mail()).queue, facade.envelope(Mail()).connection) == (
        "default",
        "memory",
    )
    declared = facade.envelope(Report())
    assert (declared.queue, declared.connection) == ("reports", "analytics")
    # Routing the connection only keeps the declared queue (ROUTE-2).
    facade.route(Report, connection="warehouse")
    routed = facade.envelope(Report())
    assert (routed.queue, routed.connection) == ("reports", "warehouse")
    facade.route(Report, queue="heavy")
    assert (facade.envelope(Report()).queue, facade.envelope(Report()).connection) == (
        "heavy",
        "analytics",
    )
    override = facade.envelope(Report(), EnvelopeOverrides(queue="now", connection="c2"))
    assert (override.queue, override.connection) == ("now", "c2")


def test_routes_are_keyed_by_class_ROUTE_3() -> None:
    facade = _facade()
    with pytest.raises(TypeError):
        facade.route("Report", queue="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidQueueName):
        facade.route(Report, queue="")


def test_forwards_are_a_single_hop_ROUTE_5_ROUTE_7_ROUTE_10() -> None:
    facade = _facade()
    facade.forward("default", "high")
    assert facade.envelope(Mail()).queue == "high"
    assert facade.forward_for("default") == ("high", None)
    facade.forward("high", "urgent")  # a -> b, b -> c: a lands on b
    assert facade.envelope(Mail()).queue == "high"
    facade.forward("high", "default")  # b -> a beside a -> b: a swap, not a loop
    assert facade.envelope(Mail()).queue == "high"
    assert facade.envelope(Mail(), EnvelopeOverrides(queue="high")).queue == "default"
    facade.forward("default", "default")  # a self-forward neutralises the earlier one
    assert facade.envelope(Mail()).queue == "default"
    assert facade.forward_for("default") is None
    with pytest.raises(ValueError, match="destination"):
        facade.forward("default", "")


def test_a_gated_forward_applies_on_its_connection_only_ROUTE_6() -> None:
    facade = _facade()
    facade.forward_on("default", "high", "redis")
    assert facade.envelope(Mail()).queue == "default"  # pushed on "memory"
    assert facade.envelope(Mail(), EnvelopeOverrides(connection="redis")).queue == "high"
    assert facade.forward_for("default") == ("high", "redis")
    # A worker on src also claims dst, on the gate's connection only (ROUTE-5, -6).
    assert facade.routing.claim_queues(["default"], "redis") == ["default", "high"]
    assert facade.routing.claim_queues(["default"], "memory") == ["default"]


async def test_a_forward_moves_future_pushes_only_ROUTE_8_ROUTE_9(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    facade.route(Mail, queue=queue_name)
    before = await facade.push(Mail(n=1))
    facade.forward(queue_name, queue_b)
    after = await facade.push(Mail(n=2))
    assert (await backend.get_job(queue_name, before)) is not None
    assert (await backend.get_job(queue_b, after)) is not None
    # Inspection is literal: the old backlog is still counted on the source.
    assert (await facade.size(queue_name), await facade.size(queue_b)) == (1, 1)


async def test_connection_names_label_until_one_is_registered_CONN_6_CONN_7(
    facade: QueueFacade, backend: JobQueueBackend, backend_kind: str, queue_name: str
) -> None:
    queued: list[JobQueued] = []
    facade.events.listen(JobQueued, queued.append)
    facade.route(Mail, queue=queue_name)
    assert facade.connection_name() == backend_kind
    job_id = await facade.push_with(Mail(), EnvelopeOverrides(connection="nope"))
    assert queued[-1].connection == "nope"
    assert (await backend.get_job(queue_name, job_id)) is not None
    other = BackendDriver(MemoryBackend(), "memory")
    facade.register_connection("reports", other)
    assert facade.connection("reports") is other
    assert facade.connection_names() == [backend_kind, "reports"]
    with pytest.raises(ConfigurationError, match="unknown queue connection 'nope'"):
        await facade.push_with(Mail(), EnvelopeOverrides(connection="nope"))
    assert await facade.size(queue_name) == 1
    # The default's own name and a registered name are selectors now.
    await facade.push_with(Mail(), EnvelopeOverrides(connection="reports"))
    assert (await facade.size(queue_name), await other.size(queue_name)) == (1, 1)
    await facade.push(Mail())
    assert await facade.size(queue_name) == 2
    facade.set_connection_name("orders-pg")
    assert facade.connection_name() == "orders-pg"
    assert facade.connection("orders-pg") is facade.driver()


def test_bootstrap_from_env_CONN_2_CONN_3_CONN_15() -> None:
    facade = QueueFacade(registry=JobRegistry())
    with pytest.raises(ConfigurationError, match="no queue connection"):
        facade.driver()
    bootstrap_from_env(facade, {"LANE_PG_DRIVER": "memory"})
    assert facade.driver_name() == "memory"
    bootstrap_from_env(facade, {"LANE_PG_DSN": "postgresql://postgres@127.0.0.1:1/none"})
    assert (facade.driver_name(), facade.connection_name()) == ("postgres", "postgres")
    bootstrap_from_env(facade, {"LANE_PG_DRIVER": "database"})
    assert facade.driver_name() == "postgres"
    with pytest.raises(ConfigurationError):
        bootstrap_from_env(facade, {"LANE_PG_DRIVER": "postgres", "LANE_PG_SCHEMA": "bad-name"})
    assert bootstrap_default(facade).driver_name() == "memory"
