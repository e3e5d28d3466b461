"""What the import contracts (pyproject.toml, ``make imports``) cannot say, and the public
API of ``lane_pg``.

import-linter checks every import statement, function bodies included; these tests check
what a user sees at run time: importing a layer loads no database driver (an import inside
a function, which the contracts allow only where listed as a seam, must not run on
import), and ``lane_pg`` offers the user's names, nothing of the worker <-> backend
protocol.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

import lane_pg
from lane_pg.backend.url import BACKENDS

REPO = Path(__file__).resolve().parent.parent
DRIVERS = ("asyncpg", "psycopg", "psycopg_pool", "sqlalchemy", "redis")
POSTGRES = "lane_pg.postgres"
WORKER = "lane_pg.worker"

# Module -> packages it must not load besides the drivers and lane_pg.postgres.
IMPORT_CHECKS: dict[str, tuple[str, ...]] = {
    "lane_pg": (),
    "lane_pg.facade.app": (),
    "lane_pg.backend": (),
    "lane_pg.memory": (),
    "lane_pg.facade": (),
    "lane_pg.scheduler": (WORKER,),
    "lane_pg.testing": ("pytest",),  # the fixture imports pytest only when it is imported
}

USER_API = {
    # what App, Q and job classes users write with
    "App",
    "Q",
    "QueueFacade",
    "Job",
    "EnvelopeOverrides",
    "register_job",
    "job",
    "current_context",
    "transaction",
    "bootstrap_from_env",
    "bootstrap_default",
    # the test fake (Q.fake()) and what it records
    "QueueFake",
    "FakedBatch",
    "FakedChain",
    # job middleware and its outcomes (MW-1..8)
    "WithoutOverlapping",
    "RateLimited",
    "ThrottlesExceptions",
    "Skip",
    "SkipIfBatchCancelled",
    "FailOnException",
    "JobOutcome",
    "Completed",
    "Released",
    "Failed",
    "Deleted",
    # opening, migrating, enqueueing inside the caller's transaction
    "connect",
    "migrate",
    "add_job",
    "add_job_sync",
    "add_jobs",
    "add_jobs_sync",
    "JobQueueBackend",
    "MemoryBackend",
    # the worker, its settings and the context a handler gets; a claim for scripts
    "Worker",
    "WorkerConfig",
    "JobContext",
    "claim_next_blocking",
    # values users pass or read
    "JobOptions",
    "Backoff",
    "RetryPolicy",
    "DeduplicationOptions",
    "RepeatOptions",
    "RepeatInfo",
    "JobSpec",
    "JobRow",
    "JobState",
    "ALL_STATES",
    "Lane",
    "DEFAULT_LANES",
    "JobPage",
    "LogEntry",
    "LogPage",
    "QueueEvent",
    "JobRateLimit",
    "JobRetention",
    "QueueRetention",
    "JobMetrics",
    "DEFAULT_JOB_METRICS_RETENTION",
    "Batch",
    # the errors
    "LaneError",
    "ConfigurationError",
    "ValidationError",
    "InvalidJobId",
    "InvalidOptions",
    "InvalidPayload",
    "InvalidPriority",
    "InvalidQueueName",
    "JobNotFound",
    "JobLocked",
    "JobStateConflict",
    "LockMismatch",
    "LeaseLost",
    "DeduplicationConflict",
    "RepeatConflict",
    "SchemaVersionMismatch",
    "JobTimedOut",
    "TimeoutExceeded",
    "MaxAttemptsExceeded",
    "ManuallyFailed",
    "BatchNotFound",
    "UnrecoverableJobError",
}

SETTLE_PROTOCOL = (
    "ClaimedJob",
    "Completion",
    "Failure",
    "FinalizeOutcome",
    "LeaseRef",
    "QueueDemand",
    "StalledOutcome",
)


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter that sees the repository only."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def _loaded_after_import(module: str) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(f"{package}.") for package in packages)


@pytest.mark.parametrize("module", list(IMPORT_CHECKS))
def test_importing_loads_no_driver(module: str) -> None:
    forbidden = (*DRIVERS, POSTGRES, *IMPORT_CHECKS[module])
    loaded = _loaded_after_import(module)
    assert module in loaded
    assert [name for name in loaded if _within(name, forbidden)] == []


def test_the_documented_one_liner_prints_nothing() -> None:
    """``import lane_pg`` leaves every driver unloaded (the check the issue gives)."""
    code = (
        "import lane_pg, sys; print([m for m in ('asyncpg', 'psycopg', 'sqlalchemy', 'redis')"
        " if m in sys.modules])"
    )
    done = _python(code)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


# ------------------------------------------------------------------ the public API


def test_all_is_the_user_api_and_each_name_resolves() -> None:
    assert sorted(lane_pg.__all__) == sorted(USER_API)
    assert len(lane_pg.__all__) == len(set(lane_pg.__all__))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a public name is served without a warning
        for name in lane_pg.__all__:
            assert getattr(lane_pg, name) is not None, name


def test_the_transactional_helpers_are_the_enqueue_modules() -> None:
    from lane_pg.memory import MemoryBackend
    from lane_pg.postgres import enqueue
    from lane_pg.postgres.schema import migrate

    assert lane_pg.add_job is enqueue.add_job
    assert lane_pg.add_job_sync is enqueue.add_job_sync
    assert lane_pg.add_jobs is enqueue.add_jobs
    assert lane_pg.add_jobs_sync is enqueue.add_jobs_sync
    assert lane_pg.migrate is migrate
    assert lane_pg.MemoryBackend is MemoryBackend


@pytest.mark.parametrize("name", SETTLE_PROTOCOL)
def test_the_settle_protocol_is_served_with_a_warning_naming_its_home(name: str) -> None:
    import lane_pg.types

    assert name not in lane_pg.__all__
    assert name not in dir(lane_pg)
    with pytest.warns(DeprecationWarning, match=rf"lane_pg\.{name} .*lane_pg\.types"):
        value = getattr(lane_pg, name)
    assert value is getattr(lane_pg.types, name)


def test_the_old_worker_entry_points_still_resolve_without_being_offered() -> None:
    from lane_pg.facade import run_worker, run_worker_on

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lane_pg.run_worker is run_worker  # type: ignore[attr-defined]
        assert lane_pg.run_worker_on is run_worker_on  # type: ignore[attr-defined]
    assert {"run_worker", "run_worker_on"}.isdisjoint({*lane_pg.__all__, *dir(lane_pg)})


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = lane_pg.nope  # type: ignore[attr-defined]


# ------------------------------------------------------------------ the contracts


def _contracts() -> dict[str, dict[str, object]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["id"]: contract for contract in config["contracts"]}


def test_every_backend_of_the_registry_is_forbidden_to_the_contract_package() -> None:
    """A backend added to ``BACKENDS`` is named in the contract package's contract, and a
    backend other than memory in the no-driver one (the facade may use memory)."""
    packages = {".".join(entry.opener.split(":")[0].split(".")[:2]) for entry in BACKENDS.values()}
    contracts = _contracts()
    assert packages <= set(contracts["contract"]["forbidden_modules"])  # type: ignore[arg-type]
    no_driver = set(contracts["no-driver"]["forbidden_modules"])  # type: ignore[arg-type]
    assert packages - {"lane_pg.memory"} <= no_driver


def test_no_import_is_ignored() -> None:
    """The facade's seams are gone (issue 23 item 2): no layer is exempt from its contract."""
    assert all("ignore_imports" not in contract for contract in _contracts().values())


@pytest.mark.skipif(
    shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None,
    reason="import-linter is in the dev extra",
)
def test_a_facade_import_of_postgres_inside_a_function_breaks_the_contracts(
    tmp_path: Path,
) -> None:
    """The contracts read function bodies: the check the issue asks to show."""
    shutil.copytree(REPO / "lane_pg", tmp_path / "lane_pg", symlinks=True)
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    lint = [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"]
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    kept = subprocess.run(lint, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    routing = tmp_path / "lane_pg" / "facade" / "routing.py"
    routing.write_text(
        routing.read_text()
        + "\n\ndef _probe() -> object:\n    from lane_pg.postgres import enqueue\n\n"
        "    return enqueue\n"
    )
    broken = subprocess.run(lint, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "lane_pg.facade.routing -> lane_pg.postgres.enqueue" in broken.stdout


@pytest.mark.parametrize("old", sorted(__import__("lane_pg._moved").__dict__["_moved"].MOVED))
def test_a_moved_module_still_imports_from_its_old_path_with_a_warning(old: str) -> None:
    """Code written against an earlier layout keeps working: the old path is the module at
    its new home, and the warning names that home."""
    from lane_pg._moved import MOVED

    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({MOVED[old]!r})\n"
        "assert old is new, (old, new)\n"
        "print([str(w.message) for w in caught if w.category is DeprecationWarning])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert f"{old} moved to {MOVED[old]}" in out
