"""The jobs page's search box: ``id:``, ``name:``, ``queue:``, ``state:`` and JSON paths
into the job's data.

    name:send_email data.user.id:42 data.plan:"gold tier"

Terms are separated by spaces (quote a value that holds one). ``data.a.b:V`` matches
the jobs whose data holds V at ``a.b``: V is read as JSON when it parses (``42``,
``true``, ``null``, ``"42"``), else as text, so ``data.user.id:42`` finds the number 42
and ``data.user.id:"42"`` the text "42". One data term per search (the backend compares
one path); every term narrows the others, but ``id:`` goes with ``queue:`` and ``state:``
only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lane_pg.types import ALL_STATES, JSON, JobState


class SearchError(ValueError):
    """A search the dashboard cannot run; its message says why."""


@dataclass(frozen=True, slots=True)
class JobSearch:
    """A parsed search: each field None when its term is absent."""

    job_id: str | None = None
    name: str | None = None
    queue: str | None = None
    state: JobState | None = None
    data_path: tuple[str, ...] | None = None
    data_value: JSON = None

    @property
    def empty(self) -> bool:
        return self == JobSearch()


FIELDS = {"id": "job_id", "name": "name", "queue": "queue"}
_DECODER = json.JSONDecoder()


def parse_search(text: str) -> JobSearch:
    """The search ``text`` as a ``JobSearch``; ``SearchError`` names the bad term."""
    found: dict[str, object] = {}
    position, end = 0, len(text)
    while True:
        while position < end and text[position].isspace():
            position += 1
        if position >= end:
            if "job_id" in found and ("name" in found or "data_path" in found):
                # One job by its id: matching it against a name or data again here would
                # write the backend's comparison (jsonb equality) a second time.
                raise SearchError("id: finds one job; search it with queue: and state: only")
            return JobSearch(**found)  # type: ignore[arg-type]
        start = position
        while position < end and not text[position].isspace() and text[position] not in ':"':
            position += 1
        key = text[start:position]
        if not key or position >= end or text[position] != ":":
            rest = text[start:].split()[0]
            raise SearchError(
                f"{rest!r}: write key:value, with key one of id, name, queue, state, data.PATH"
                ' (quote a value holding a space: data.plan:"gold tier")'
            )
        position += 1
        value: JSON
        if position < end and text[position] in '"[{':  # a JSON value: "42" stays text
            try:
                value, position = _DECODER.raw_decode(text, position)
            except ValueError:
                raise SearchError(f"{text[start:]!r}: the value is not valid JSON") from None
            quoted = True
        else:
            value_start = position
            while position < end and not text[position].isspace():
                if text[position] == '"':
                    raise SearchError(f"{text[start:]!r}: a quote starts a value, not inside it")
                position += 1
            value, quoted = text[value_start:position], False
        if position < end and not text[position].isspace():
            raise SearchError(f"{text[start:]!r}: put a space between terms")
        term = text[start:position]
        if key.split(".")[0] == "data":
            _data_term(found, key, value if quoted else _json_or_text(str(value)), term)
        elif not isinstance(value, str):
            raise SearchError(f"{term!r}: {key} takes text")
        elif key in FIELDS:
            _set(found, FIELDS[key], value, term)
        elif key == "state":
            if value not in ALL_STATES:
                raise SearchError(f"{term!r}: the state is one of {', '.join(ALL_STATES)}")
            _set(found, "state", value, term)
        else:
            raise SearchError(
                f"{term!r}: unknown key {key!r}; use id, name, queue, state or data.PATH"
            )


def _data_term(found: dict[str, object], key: str, value: JSON, term: str) -> None:
    path = tuple(key.split(".")[1:])
    if (key != "data" and not key.startswith("data.")) or any(not part for part in path):
        raise SearchError(f"{term!r}: a data path is data.key.key...")
    _set(found, "data_path", path, term)
    found["data_value"] = value


def _set(found: dict[str, object], key: str, value: object, term: str) -> None:
    if key in found:
        raise SearchError(f"{term!r}: only one {key.replace('_', ' ')} term per search")
    found[key] = value


def _json_or_text(value: str) -> JSON:
    try:
        parsed: JSON = json.loads(value)
    except ValueError:
        return value
    return parsed


def format_search(search: JobSearch) -> str:
    """The search as text ``parse_search`` reads back to the same ``JobSearch``."""
    terms = []
    for key, field in FIELDS.items():
        value = getattr(search, field)
        if value is not None:
            terms.append(f"{key}:{_written(value)}")
    if search.state is not None:
        terms.append(f"state:{search.state}")
    if search.data_path is not None:
        key = ".".join(("data", *search.data_path))
        data = search.data_value
        bare = isinstance(data, str) and _written(data) == data and _json_or_text(data) == data
        text = data if bare else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        terms.append(f"{key}:{text}")
    return " ".join(terms)


def _written(value: str) -> str:
    """Text as a search value: bare when that reads back as itself, else a JSON string."""
    if value and value[0] not in '"[{' and not any(c.isspace() or c == '"' for c in value):
        return value
    return json.dumps(value, ensure_ascii=False)
