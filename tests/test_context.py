"""``lane_pg.context`` on its own (CTX-1, CTX-3, CTX-7): scopes, snapshots, restores and
hooks, with no queue at all. The travel of a context through a push and a worker is in
tests/facade/test_context.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from lane_pg import context
from lane_pg.context import ContextData


@pytest.fixture(autouse=True)
def _no_hooks() -> Iterator[None]:
    yield
    context.clear_hooks()


def test_values_live_in_a_scope_and_are_gone_after_it_CTX_1() -> None:
    with context.scope(tenant_id="acme"):
        context.add("user", 7)
        context.add_hidden("token", "s3cr3t")
        assert (context.get("tenant_id"), context.get("user")) == ("acme", 7)
        assert context.get_hidden("token") == "s3cr3t"
        assert context.get("token") is None  # hidden values are not visible ones
        assert context.all() == {"tenant_id": "acme", "user": 7}
        assert context.all_hidden() == {"token": "s3cr3t"}
        with context.scope(step="inner"):
            context.add("user", 8)
            assert context.all() == {"tenant_id": "acme", "user": 8, "step": "inner"}
        assert context.all() == {"tenant_id": "acme", "user": 7}  # the inner scope ended
        context.forget("token")
        context.forget("absent")
        assert context.all_hidden() == {}
    assert context.snapshot() is None
    assert context.get("tenant_id", "none") == "none"


def test_snapshot_is_none_when_empty_and_a_copy_otherwise_CTX_1() -> None:
    with context.scope():
        assert context.snapshot() is None
        context.add("tags", ["a"])
        context.add_hidden("key", {"k": 1})
        taken = context.snapshot()
        assert taken == {"visible": {"tags": ["a"]}, "hidden": {"key": {"k": 1}}}
        context.get("tags").append("b")  # the live value changes; the snapshot does not
        assert taken["visible"]["tags"] == ["a"]


def test_values_must_be_json_and_keys_strings_CTX_1() -> None:
    with context.scope():
        with pytest.raises(TypeError, match="must be JSON"):
            context.add("when", object())
        with pytest.raises(TypeError, match="non-empty string"):
            context.add_hidden("", 1)
        assert context.snapshot() is None  # nothing was stored


def test_restore_is_a_fresh_copy_that_leaks_nothing_CTX_3() -> None:
    with context.scope(tenant_id="pusher"):
        stored = context.snapshot()
        with context.restore(stored):
            assert context.get("tenant_id") == "pusher"
            context.add("x", 1)
            context.add("tenant_id", "changed")
        assert context.all() == {"tenant_id": "pusher"}  # the pusher's scope is untouched
        with context.restore(stored):
            assert context.get("x") is None  # the next restore starts from the snapshot
        with context.restore(None):
            assert context.all() == {}
        with context.restore({"visible": "not a dict"}):  # a malformed snapshot: empty
            assert context.all() == {}


async def test_tasks_outside_a_scope_never_share_values_CTX_3() -> None:
    """Two tasks (two requests) that add without a scope each get a scope of their own."""
    started = asyncio.Event()

    async def request(name: str) -> dict[str, object]:
        context.add("request", name)
        started.set()
        await asyncio.sleep(0)
        return context.all()

    first, second = await asyncio.gather(request("a"), request("b"))
    assert (first, second) == ({"request": "a"}, {"request": "b"})
    assert context.all() == {}  # and neither reached the task that started them


def test_hooks_change_the_snapshot_not_the_scope_and_run_at_restore_CTX_7() -> None:
    dehydrated: list[dict[str, object]] = []
    hydrated: list[dict[str, object]] = []

    def stamp(data: ContextData) -> None:
        dehydrated.append(dict(data.visible))
        data.hidden["stamped"] = True

    def seen(data: ContextData) -> None:
        hydrated.append(dict(data.visible))
        data.visible["hydrated"] = True

    stop_stamp = context.dehydrating(stamp)
    context.hydrated(seen)
    with context.scope(tenant_id="acme"):
        stored = context.snapshot()
        assert stored == {"visible": {"tenant_id": "acme"}, "hidden": {"stamped": True}}
        assert context.all_hidden() == {}  # the hook changed the snapshot only
        with context.restore(stored):
            assert context.get("hydrated") is True
        with context.restore(stored, hooks=False):
            assert context.get("hydrated") is None
    assert (len(dehydrated), len(hydrated)) == (1, 1)
    stop_stamp()
    with context.scope(tenant_id="acme"):
        assert context.snapshot() == {"visible": {"tenant_id": "acme"}, "hidden": {}}
    assert len(dehydrated) == 1
