"""Testing helpers for applications that push with ``lane_pg.Q``.

    from lane_pg.testing import install_fake

    fake = install_fake()            # Q records pushes from now on
    try:
        await signup(user_id=42)
        fake.assert_pushed(SendWelcomeEmail, lambda job: job.user_id == 42)
    finally:
        fake.uninstall()             # or: with install_fake() as fake: ...

For pytest, import the fixture into your ``conftest.py``:

    from lane_pg.testing import lane_fake  # noqa: F401

and ask for ``lane_fake`` in a test: it is the fake installed on ``lane_pg.Q`` for that
test. pytest is not a dependency of lane_pg: the fixture is made (and pytest imported)
only when ``lane_fake`` is imported from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lane_pg.facade.fake import FakedBatch, FakedChain, FakedPush, QueueFake

if TYPE_CHECKING:
    from lane_pg.facade.queue import QueueFacade


def install_fake(facade: QueueFacade | None = None) -> QueueFake:
    """Install a fake on ``facade`` (``lane_pg.Q`` by default) and return it; call its
    ``uninstall()`` (or use it in ``with``) to end it."""
    if facade is None:
        from lane_pg.facade import Q

        facade = Q
    return facade.fake().install()


def _fake_of_q() -> Iterator[QueueFake]:
    with install_fake() as fake:
        yield fake


def __getattr__(name: str) -> Any:
    """``lane_fake``, the pytest fixture, made on first import so that importing this
    module never needs pytest."""
    if name != "lane_fake":
        raise AttributeError(f"module 'lane_pg.testing' has no attribute {name!r}")
    import pytest

    fixture = pytest.fixture(name="lane_fake")(_fake_of_q)
    globals()[name] = fixture
    return fixture


__all__ = ["FakedBatch", "FakedChain", "FakedPush", "QueueFake", "install_fake"]
