"""Unique and debounced pushes under the sync driver (UNIQ-8, the sync half of UNIQ-13):
the handler runs inline inside the push, nothing is stored to hold a lock or a window."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

import pytest

from lane_pg.facade import DebounceOptions, Job, JobRegistry, QueueFacade, SyncDriver

RUNS: list[int] = []


@dataclass
class Mail(Job):
    job_name = "SyncMail"
    unique_until_processing = True
    n: int

    def unique_id(self) -> str:
        return "same"

    async def handle(self) -> None:
        RUNS.append(self.n)


@dataclass
class Typing(Job):
    job_name = "SyncTyping"
    debounce_for = timedelta(seconds=2)
    n: int

    async def handle(self) -> None:
        RUNS.append(self.n)


def _facade() -> QueueFacade:
    RUNS.clear()
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(SyncDriver())
    return facade


async def test_push_unique_runs_inline_and_warns_UNIQ_8(caplog: pytest.LogCaptureFixture) -> None:
    facade = _facade()
    with caplog.at_level(logging.WARNING, logger="lane_pg.facade"):
        assert await facade.push_unique(Mail(n=1)) is True
        assert await facade.push_unique(Mail(n=2)) is True  # no lock outlives the push
    assert RUNS == [1, 2]
    text = caplog.text
    assert "exclusivity could not be proven" in text
    assert "lost" in text and "SyncMail:same" in text


async def test_debounce_never_collapses_under_sync_UNIQ_13() -> None:
    facade = _facade()
    for n in range(3):
        await facade.push(Typing(n=n))
    await facade.push_debounced(Typing(n=3), DebounceOptions(timedelta(seconds=1)))
    assert RUNS == [0, 1, 2, 3]
