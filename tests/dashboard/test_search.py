"""The jobs page's search syntax: what each term means, what is refused, and that a
search written back as text reads back the same."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lane_pg.dashboard.search import JobSearch, SearchError, format_search, parse_search


def test_terms_and_values() -> None:
    assert parse_search("queue:emails name:send  data.user.id:42 state:failed") == JobSearch(
        name="send", queue="emails", state="failed", data_path=("user", "id"), data_value=42
    )
    assert parse_search('data.user.id:"42"').data_value == "42"
    assert parse_search('data.plan:"gold tier"').data_value == "gold tier"
    assert parse_search("data.plan:gold").data_value == "gold"
    assert parse_search("data.flag:null") == JobSearch(data_path=("flag",), data_value=None)
    assert parse_search("data:true") == JobSearch(data_path=(), data_value=True)
    assert parse_search('name:"two words"').name == "two words"
    assert parse_search("id:17").job_id == "17"
    assert parse_search("   ").empty


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("emails", "key:value"),
        ("owner:bob", "unknown key"),
        ("state:done", "the state is one of"),
        ("name:a name:b", "only one name"),
        ("data.a:1 data.b:2", "only one data path"),
        ("data..a:1", "data.key.key"),
        ('name:"open', "not valid JSON"),
        ('name:a"b', "a quote starts a value"),
        ("id:7 name:send", "id: finds one job"),
        ("id:7 data.a:1", "id: finds one job"),
    ],
)
def test_a_bad_search_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(SearchError, match=says):
        parse_search(text)


names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | names,
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=5,
)


@given(
    job_id=st.none() | names,
    name=st.none() | names,
    queue=st.none() | st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True),
    state=st.none() | st.sampled_from(["waiting", "failed"]),
    path=st.none() | st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), max_size=3),
    value=json_values,
)
def test_a_search_written_as_text_reads_back_the_same(
    job_id: str | None,
    name: str | None,
    queue: str | None,
    state: str | None,
    path: list[str] | None,
    value: object,
) -> None:
    if job_id is not None:  # id: goes with queue: and state: only
        name, path = None, None
    search = JobSearch(
        job_id=job_id,
        name=name,
        queue=queue,
        state=state,  # type: ignore[arg-type]
        data_path=None if path is None else tuple(path),
        data_value=None if path is None else value,  # type: ignore[arg-type]
    )
    assert parse_search(format_search(search)) == search
