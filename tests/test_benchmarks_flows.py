"""Smoke run of the flow benchmarks (F1, F2) at tiny sizes: every line comes out in the
suite's format and the correctness checks hold. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ADMIN_DSN = os.environ.get("LANE_PG_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def test_flow_benchmarks_smoke() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANE_PG_", "LANE_BENCH_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["LANE_BENCH_ADMIN_DSN"] = ADMIN_DSN
    env["LANE_BENCH_DB"] = f"lane_bench_smoke_{uuid.uuid4().hex[:8]}"  # dropped at the end
    sizes = ["--f1-flows", "5", "--f2-children", "120", "--w3-concurrency", "20"]
    done = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--only", "F1,F2", "--runs", "1", *sizes],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    by_subject = {(line["workload"], line["subject"]): line for line in lines}
    for line in lines:
        assert {"workload", "subject", "value", "unit", "ratio_to_raw", "notes", "runs"} <= set(
            line
        )
    assert ("F1", "lane_pg flows x2") in by_subject
    assert "ratio_to_plain" in by_subject[("F1", "lane_pg flows x2")]
    assert ("F1", "lane_pg parent release after its last child, p99") in by_subject
    assert ("F2", "lane_pg flow children drained x2") in by_subject
    assert ("F2", "lane_pg in-database complete of 50, children") in by_subject
    releases = by_subject[("F2", "lane_pg parent releases")]
    assert releases["exactly_once"] is True
    assert releases["states"] == ["loop: waiting", "workers: waiting"]
    pages = [s for w, s in by_subject if w == "F2" and "get_flow_dependency_page" in s]
    assert len(pages) == 11
