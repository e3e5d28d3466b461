"""``python -m lane_pg job QUEUE ID`` and ``jobs QUEUE`` as an operator runs them against a
real database: one job in each situation an operator looks into (completed with a value
and a log line, failed after two attempts, active under a worker's lease, a flow parent
and its children, a batch member), the listing by state, the search by name and data, in
JSON and paged, and every refusal."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest

from lane_pg.cli.job import TRACE_LINES
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueDemand, QueuedSpec
from lane_pg.types.flows import FlowJob
from tests.test_cli_queue_commands import cli, unique_queue

LABELS = [
    "id",
    "name",
    "queue",
    "state",
    "priority",
    "attempts",
    "created",
    "available",
    "processed",
    "finished",
    "progress",
    "data",
    "return value",
    "failed reason",
    "lease",
    "parent",
    "children",
    "batch",
    "chain",
    "deduplication",
    "repeat",
    "stacktraces",
    "logs",
    "events",
]
JOBS_HEADER = [
    "id",
    "name",
    "state",
    "attempts",
    "created_at",
    "available_or_finished_at",
    "failed_reason",
]


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


def fields(stdout: str) -> dict[str, str]:
    """The labelled lines of ``job``'s output (indented detail lines left out)."""
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        if line and not line.startswith(" "):
            label = next(lb for lb in sorted(LABELS, key=len, reverse=True) if line.startswith(lb))
            found[label] = line[len(label) :].strip()
    return found


def details(stdout: str, label: str) -> list[str]:
    """The indented lines under ``label``, stripped."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(label))
    below = []
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            break
        below.append(line.strip())
    return below


async def job_of(pg_dsn: str, queue: str, job_id: str, *extra: str) -> dict[str, str]:
    done = await cli("job", queue, job_id, *extra, dsn=pg_dsn)
    assert done.returncode == 0, done.stderr
    return fields(done.stdout)


# --------------------------------------------------------------------------- job


async def test_a_completed_job_shows_its_value_its_log_and_its_events(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("done")
    added = await backend.jobs.add_job(queue, "resize", {"image": "a.png"}, {"priority": 3})
    [claimed] = await backend.runs.claim_jobs("worker-1", [QueueDemand(queue, 1)], 30)
    await backend.logs.add_job_log(queue, claimed.id, "resized to 64x64")
    await backend.runs.complete_job(queue, claimed.id, claimed.lock_token, {"bytes": 2048})

    done = await cli("job", queue, added.id, dsn=pg_dsn)
    assert done.returncode == 0, done.stderr
    shown = fields(done.stdout)
    assert list(shown) == LABELS  # every label, in this order, whatever the job
    assert shown["id"] == added.id and shown["queue"] == queue
    assert (shown["name"], shown["state"], shown["priority"]) == ("resize", "completed", "3")
    assert shown["attempts"] == "0 made, 1 started, 1 max"
    assert shown["data"] == '{"image": "a.png"}'
    assert shown["return value"] == '{"bytes": 2048}'
    assert shown["failed reason"] == shown["lease"] == shown["batch"] == "-"
    assert shown["finished"] != "-" and shown["processed"] != "-"
    assert shown["logs"] == "1 line"
    [log_line] = details(done.stdout, "logs")
    assert log_line.endswith("  resized to 64x64")
    assert shown["events"].startswith("the newest 4 ")
    events = [line.split("  ")[1] for line in details(done.stdout, "events")]
    assert events == ["added", "waiting", "active", "completed"]

    as_json = await cli("job", queue, added.id, "--json", dsn=pg_dsn)
    document = json.loads(as_json.stdout)
    assert document["return_value"] == {"bytes": 2048}
    assert document["attempts"] == {"made": 0, "started": 1, "max": 1, "stalled": 0}
    assert [line["message"] for line in document["logs"]["lines"]] == ["resized to 64x64"]
    assert [event["event"] for event in document["events"]["items"]][-1] == "completed"
    assert document["lease"] is None and document["flow"] is None

    skipped = await job_of(pg_dsn, queue, added.id, "--events", "0", "--logs", "0")
    assert skipped["events"].startswith("- (not read")
    assert skipped["logs"] == "1 line, the newest 0 shown (--logs)"


async def test_a_failed_job_shows_the_trace_of_each_attempt_cut_to_its_end(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("failed")
    added = await backend.jobs.add_job(queue, "charge", {"card": "4242"}, {"attempts": 2})
    for attempt in (1, 2):
        [claimed] = await backend.runs.claim_jobs("worker-1", [QueueDemand(queue, 1)], 30)
        trace = "\n".join(
            ["Traceback (most recent call last):"]
            + [f'  File "charge.py", line {n}, in step' for n in range(30)]
            + [f"RuntimeError: declined (attempt {attempt})"]
        )
        await backend.runs.fail_job(
            queue, claimed.id, claimed.lock_token, f"declined (attempt {attempt})", stacktrace=trace
        )

    done = await cli("job", queue, added.id, dsn=pg_dsn)
    assert done.returncode == 0, done.stderr
    shown = fields(done.stdout)
    assert (shown["state"], shown["attempts"]) == ("failed", "2 made, 2 started, 2 max")
    assert shown["failed reason"] == "declined (attempt 2)"
    assert shown["return value"] == "-"
    assert shown["stacktraces"] == "2 (newest last)"
    traces = details(done.stdout, "stacktraces")
    cut = 32 - TRACE_LINES
    assert traces[0] == "[1]"
    assert traces[1] == f"... {cut} earlier lines cut (--full prints them)"
    assert traces[1 + TRACE_LINES] == "RuntimeError: declined (attempt 1)"
    assert traces[2 + TRACE_LINES] == "[2]"
    assert traces[-1] == "RuntimeError: declined (attempt 2)"
    assert "Traceback (most recent call last):" not in traces

    full = await cli("job", queue, added.id, "--full", dsn=pg_dsn)
    assert details(full.stdout, "stacktraces").count("Traceback (most recent call last):") == 2

    document = json.loads((await cli("job", queue, added.id, "--json", dsn=pg_dsn)).stdout)
    assert [t.splitlines()[-1] for t in document["stacktraces"]] == [
        "RuntimeError: declined (attempt 1)",
        "RuntimeError: declined (attempt 2)",
    ]


async def test_an_active_job_names_its_lease_holder_and_long_data_is_cut(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("active")
    payload = {"text": "x" * 2000}
    added = await backend.jobs.add_job(queue, "index", payload)
    [claimed] = await backend.runs.claim_jobs("worker-7", [QueueDemand(queue, 1)], 30)
    await backend.jobs.update_job_progress(queue, claimed.id, 40, token=claimed.lock_token)

    shown = await job_of(pg_dsn, queue, added.id)
    assert shown["state"] == "active"
    assert shown["lease"].startswith("worker worker-7, expires ")
    assert shown["progress"] == "40"
    whole = json.dumps(payload)
    assert shown["data"].startswith(whole[:100])
    assert shown["data"].endswith(
        f" ... ({len(whole) - 500} more characters; --full prints it whole)"
    )
    assert (await job_of(pg_dsn, queue, added.id, "--full"))["data"] == whole

    document = json.loads((await cli("job", queue, added.id, "--json", dsn=pg_dsn)).stdout)
    assert document["lease"]["worker_id"] == "worker-7"
    assert document["data"] == payload  # JSON output is never cut


async def test_a_flow_parent_lists_its_children_with_their_states_and_values(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("flow")
    await backend.flows.add_flow(
        FlowJob(
            "report",
            queue=queue,
            options={"job_id": "report"},
            children=[FlowJob("part", n, {"job_id": f"part-{n}"}) for n in range(2)],
        )
    )
    [first] = await backend.runs.claim_jobs("w", [QueueDemand(queue, 1)], 30)
    await backend.runs.complete_job(queue, first.id, first.lock_token, {"rows": 7})

    done = await cli("job", queue, "report", dsn=pg_dsn)
    assert done.returncode == 0, done.stderr
    shown = fields(done.stdout)
    assert shown["state"] == "waiting-children"
    assert shown["children"] == "1 processed, 1 unprocessed, 0 ignored, 0 failed, 0 missing"
    children = [line.split() for line in details(done.stdout, "children")]
    assert children == [
        ["processed", queue, first.id, "completed", "returned", '{"rows":', "7}"],
        [
            "unprocessed",
            queue,
            next(f"part-{n}" for n in range(2) if f"part-{n}" != first.id),
            "waiting",
        ],
    ]

    counts_only = await cli("job", queue, "report", "--children", "0", dsn=pg_dsn)
    assert fields(counts_only.stdout)["children"] == shown["children"]
    assert details(counts_only.stdout, "children") == []

    child = await job_of(pg_dsn, queue, first.id)
    assert child["parent"] == f"{queue} report"
    assert child["children"] == "-"

    document = json.loads((await cli("job", queue, "report", "--json", dsn=pg_dsn)).stdout)
    values = {c["id"]: c["value"] for c in document["flow"]["children"]}
    assert values[first.id] == {"rows": 7}


async def test_a_batch_member_names_its_batch_and_a_chain_link_its_chain(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("batch")
    batch_id = str(uuid.uuid4())
    [member, _] = await backend.batches.add_batch(
        batch_id, "import", [QueuedSpec(queue, "row", {"n": n}) for n in range(2)]
    )
    assert (await job_of(pg_dsn, queue, member))["batch"] == batch_id

    chain_id = f"nightly-{uuid.uuid4().hex[:8]}"
    head = await backend.jobs.add_chain(
        chain_id, [QueuedSpec(queue, "extract"), QueuedSpec(queue, "load")]
    )
    shown = await job_of(pg_dsn, queue, head.id)
    assert shown["chain"] == f"{chain_id} (link 0, 1 to come)"
    assert shown["batch"] == "-"


async def test_a_missing_job_and_bad_counts_exit_1(pg_dsn: str, backend: PostgresBackend) -> None:
    queue = unique_queue("missing")
    await backend.jobs.add_job(queue, "x", None)
    missing = await cli("job", queue, "nope", dsn=pg_dsn)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr.rstrip().endswith(f"job nope not found in queue {queue}")
    bad = await cli("job", queue, "nope", "--logs", "many", dsn=pg_dsn)
    assert bad.returncode == 1 and "--logs 'many'" in bad.stderr


# --------------------------------------------------------------------------- jobs


async def test_jobs_lists_newest_first_by_state_and_name(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("list")
    first = await backend.jobs.add_job(queue, "mail", {"n": 1})
    second = await backend.jobs.add_job(queue, "sms", {"n": 2})
    third = await backend.jobs.add_job(queue, "mail", {"n": 3})
    [claimed] = await backend.runs.claim_jobs("w", [QueueDemand(queue, 1)], 30)
    assert claimed.id == first.id
    reason = "smtp said no: " + "z" * 200
    await backend.runs.fail_job(queue, claimed.id, claimed.lock_token, reason)

    listed = await cli("jobs", queue, dsn=pg_dsn)
    assert listed.returncode == 0, listed.stderr
    header, *rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert header == JOBS_HEADER
    assert [row[:4] for row in rows] == [
        [third.id, "mail", "waiting", "0/1"],
        [second.id, "sms", "waiting", "0/1"],
        [first.id, "mail", "failed", "1/1"],
    ]
    failed = rows[2]
    assert failed[5] != failed[4]  # a finished job shows when it finished
    assert failed[6].startswith("smtp said no: zzz") and failed[6].endswith("...")
    assert len(failed[6]) == 80
    assert listed.stderr == ""

    only_failed = await cli("jobs", queue, "--state", "failed", dsn=pg_dsn)
    assert [line.split("\t")[0] for line in only_failed.stdout.splitlines()[1:]] == [first.id]
    both = await cli("jobs", queue, "--state", "failed", "--state", "waiting", dsn=pg_dsn)
    assert len(both.stdout.splitlines()) == 4
    mail = await cli("jobs", queue, "--name", "mail", dsn=pg_dsn)
    assert [line.split("\t")[0] for line in mail.stdout.splitlines()[1:]] == [third.id, first.id]

    as_json = await cli("jobs", queue, "--json", "--state", "waiting,failed", dsn=pg_dsn)
    documents = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [d["id"] for d in documents] == [third.id, second.id, first.id]
    assert documents[2]["failed_reason"] == reason  # whole in JSON
    assert documents[2]["attempts_made"] == 1

    page = await cli("jobs", queue, "--limit", "2", dsn=pg_dsn)
    assert [line.split("\t")[0] for line in page.stdout.splitlines()[1:]] == [third.id, second.id]
    assert page.stderr == "lane_pg: jobs 1-2 of 3; next page: --offset 2\n"
    rest = await cli("jobs", queue, "--limit", "2", "--offset", "2", dsn=pg_dsn)
    assert [line.split("\t")[0] for line in rest.stdout.splitlines()[1:]] == [first.id]
    assert rest.stderr == ""

    empty = await cli("jobs", queue, "--state", "delayed", dsn=pg_dsn)
    assert empty.stdout.splitlines() == ["\t".join(JOBS_HEADER)]
    assert empty.stderr == f"lane_pg: no jobs in queue {queue} in state delayed\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--state", "done"], "--state 'done': unknown state; use one of waiting, delayed,"),
        (["--state", "failed,finished"], "--state 'finished': unknown state"),
        (["--limit", "0"], "--limit '0': expected 1 to 10000"),
        (["--limit", "ten"], "--limit 'ten': expected a page size"),
        (["--limit", "-5"], "--limit '-5': expected a page size"),
        (["--offset", "x"], "--offset 'x': expected a count"),
        (["--data", "user"], "--data 'user': expected PATH=VALUE, PATH dotted keys"),
        (["--data", "user..id=1"], "--data 'user..id=1': expected PATH=VALUE"),
        (["--data", "=1"], "--data '=1': expected PATH=VALUE"),
        (
            ["--name", "x", "--offset", "99990", "--limit", "50"],
            "--offset '99990': expected at most 99950 with --name or --data",
        ),
    ],
)
async def test_jobs_refuses_bad_states_and_counts_with_exit_1(
    pg_dsn: str, argv: list[str], message: str
) -> None:
    done = await cli("jobs", "anything", *argv, dsn=pg_dsn)
    assert (done.returncode, done.stdout) == (1, "")
    assert message in done.stderr
    assert done.stderr.count("\n") == 1


def ids_of(stdout: str) -> list[str]:
    return [line.split("\t")[0] for line in stdout.splitlines()[1:]]


async def test_jobs_searches_by_name_and_data_state_by_state_in_full_pages(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    """A page holds --limit matches however many other jobs lie between them; waiting
    ones in run order, then finished ones newest first."""
    queue = unique_queue("search")
    mail: list[str] = []
    for n in range(8):
        mail.append((await backend.jobs.add_job(queue, "mail", {"user": {"id": n}})).id)
        for _ in range(3):
            await backend.jobs.add_job(queue, "sms", {"user": {"id": n}})
    text = await backend.jobs.add_job(queue, "mail", {"user": {"id": "4"}})
    for claimed in await backend.runs.claim_jobs("w", [QueueDemand(queue, 5)], 30):
        await backend.runs.complete_job(queue, claimed.id, claimed.lock_token or "", None)
    # mail[0] and mail[1] completed, mail[1] last: newest finished first after the waiting
    expected = [*mail[2:], text.id, mail[1], mail[0]]

    shown: list[str] = []
    offset = 0
    while True:
        page = await cli("jobs", queue, "--name", "mail", "--limit", "4", "--offset", str(offset),
                         dsn=pg_dsn)  # fmt: skip
        assert page.returncode == 0, page.stderr
        shown += ids_of(page.stdout)
        if not page.stderr:
            break
        assert len(ids_of(page.stdout)) == 4  # a full page, not the mail jobs of 4 read
        assert page.stderr == (
            f"lane_pg: matching jobs {offset + 1}-{offset + 4}, more match;"
            f" next page: --offset {offset + 4}\n"
        )
        offset += 4
    assert shown == expected

    number = await cli("jobs", queue, "--data", "user.id=4", "--name", "mail", dsn=pg_dsn)
    assert ids_of(number.stdout) == [mail[4]]  # the number 4, not the string "4"
    string = await cli("jobs", queue, "--data", 'user.id="4"', "--json", dsn=pg_dsn)
    assert [json.loads(line)["id"] for line in string.stdout.splitlines()] == [text.id]
    finished = await cli("jobs", queue, "--data", "user.id=1", "--state", "completed",
                         dsn=pg_dsn)  # fmt: skip
    assert [row.split("\t")[:3] for row in finished.stdout.splitlines()[1:]] == [
        [mail[1], "mail", "completed"]
    ]
    none = await cli("jobs", queue, "--data", "user.name=ann", dsn=pg_dsn)
    assert none.stdout.splitlines() == ["\t".join(JOBS_HEADER)]
    assert none.stderr == f"lane_pg: no matching jobs in queue {queue}\n"


async def test_jobs_counts_the_tries_started_of_those_allowed(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    """A completed job ran once: ``1/1``, not the failures-only ``attempts_made`` (0)."""
    queue = unique_queue("tries")
    await backend.jobs.add_job(queue, "mail", {"n": 1}, {"attempts": 3})
    [job] = await backend.runs.claim_jobs("w", [QueueDemand(queue, 1)], 30)
    await backend.runs.complete_job(queue, job.id, job.lock_token, None)

    listed = await cli("jobs", queue, dsn=pg_dsn)
    assert [line.split("\t")[:4] for line in listed.stdout.splitlines()[1:]] == [
        [job.id, "mail", "completed", "1/3"],
    ]
