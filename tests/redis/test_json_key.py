"""includes/json_key.lua on a real Redis: one top-level key of a JSON object text set
without decoding it (the options document of reschedule_job.lua and update_job_priority.lua),
against Python's ``{**document, key: value}`` on random documents, their other values
kept as the text was (big integers, empty arrays, escapes, nested keys of the same name)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from lane_pg.redis.scripts import Scripts

TEST_LUA = Path(__file__).parent / "lua"

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
KEYS = st.sampled_from(["lifo", "delay_ms", "a", 'x"y', "\\", "lifo2", "}", "[", ",", ""])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=10,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    documents=st.lists(st.dictionaries(KEYS, VALUES, max_size=5), min_size=1, max_size=8),
    name=st.sampled_from(["lifo", "delay_ms"]),
    value=st.sampled_from(["true", "false", "0", "600000", "9007199254740993"]),
    spaced=st.booleans(),
)
async def test_a_key_is_set_as_python_sets_it_and_the_rest_kept(
    redis_client: Redis, documents: list[dict[str, object]], name: str, value: str, spaced: bool
) -> None:
    separators = (", ", ": ") if spaced else (",", ":")
    texts = [json.dumps(doc, separators=separators, ensure_ascii=False) for doc in documents]
    result = await Scripts(redis_client, TEST_LUA).call(
        "json_key_probe",
        ["{probe}:none"],
        {"cases": [{"text": text} for text in texts], "name": name, "value": value},
    )
    for document, text, changed in zip(documents, texts, result, strict=True):
        assert json.loads(changed) == {**document, name: json.loads(value)}
        if name not in document:  # appended: the original text stands unchanged before it
            assert changed.startswith(text[:-1])
