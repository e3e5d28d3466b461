"""An operation's declaration, the class of its arguments: what a dataclass would do,
without its import cost (``lane_pg.backend.operation``)."""

from __future__ import annotations

import inspect
from dataclasses import KW_ONLY

import pytest

from lane_pg.backend.jobs import AddJob
from lane_pg.backend.operation import Arguments, parameters_of


class Sample(Arguments[int]):
    """A sample declaration."""

    queue: str
    limit: int = 10
    _: KW_ONLY
    now: float | None = None
    token: str | None = None


def test_the_call_takes_the_fields_with_their_defaults_and_keyword_only_marker() -> None:
    assert str(parameters_of(Sample)) == "(queue, limit=10, *, now=None, token=None)"
    sample = Sample("q", now=1.5)
    assert (sample.queue, sample.limit, sample.now, sample.token) == ("q", 10, 1.5, None)
    with pytest.raises(TypeError):
        Sample("q", 1, 2.0)  # type: ignore[misc]  # now is keyword-only
    with pytest.raises(TypeError):
        Sample()  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        sample.other = 1  # type: ignore[attr-defined]  # slots: no stray attribute


def test_records_compare_and_print_by_their_fields() -> None:
    assert Sample("q", now=1.0) == Sample("q", 10, now=1.0)
    assert Sample("q") != Sample("r")
    assert Sample("q") != AddJob("q", "n")
    assert repr(Sample("q")) == "Sample(queue='q', limit=10, now=None, token=None)"
    assert Sample("q", token="t").as_dict() == {
        "queue": "q",
        "limit": 10,
        "now": None,
        "token": "t",
    }


def test_a_declaration_is_refused_where_a_dataclass_would_be() -> None:
    with pytest.raises(TypeError, match="mutable default"):

        class Shared(Arguments[None]):
            """Refused."""

            names: list[str] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="without a default after one with"):

        class Misordered(Arguments[None]):
            """Refused."""

            limit: int = 1
            queue: str


def test_the_signature_users_read_is_the_declarations() -> None:
    """``help(backend.jobs.add_job)`` and editors show the declared parameters."""
    from lane_pg.backend import Jobs

    assert inspect.signature(Jobs.add_job) == parameters_of(AddJob)
    assert "add" in (Jobs.add_job.__doc__ or "")
