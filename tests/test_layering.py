"""Layers point down: the application layer, the worker, the memory backend, the lane
scheduler and the protocol import no database driver and no PostgreSQL module.

Two checks, as an import-linter contract would make them: importing each module in a
fresh interpreter loads none of them (what a user sees), and no module of those packages
imports one at module level (what keeps that true: an import inside a function, or under
``if TYPE_CHECKING:``, runs only when a backend that needs it is created). A driver is
imported by ``lane_pg.backend.connect`` when a URL asks for its backend.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "lane_pg"
DRIVERS = ("asyncpg", "psycopg", "psycopg_pool", "sqlalchemy", "redis")
POSTGRES = "lane_pg.postgres"
WORKER = "lane_pg.worker"

# Module -> packages it must not load besides the drivers and lane_pg.postgres.
IMPORT_CHECKS: dict[str, tuple[str, ...]] = {
    "lane_pg": (),
    "lane_pg.app": (),
    "lane_pg.backend": (),
    "lane_pg.memory": (),
    "lane_pg.facade": (),
    "lane_pg.lanes": (WORKER,),
}


def _loaded_after_import(module: str) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
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
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


# ------------------------------------------------------------------ static contract


def _layer_files() -> dict[Path, tuple[str, ...]]:
    """The source files of the layers, each with what it must not import at module level.
    The worker is found by path (``lane_pg/worker.py`` or the package ``lane_pg/worker/``)
    so the contract holds whichever shape it has."""
    files: dict[Path, tuple[str, ...]] = {}
    never = (*DRIVERS, POSTGRES)
    for path in [
        PACKAGE / "__init__.py",
        PACKAGE / "app.py",
        PACKAGE / "options.py",
        PACKAGE / "types.py",
        PACKAGE / "errors.py",
        *sorted((PACKAGE / "backend").rglob("*.py")),
        *sorted((PACKAGE / "memory").rglob("*.py")),
        *sorted((PACKAGE / "facade").rglob("*.py")),
        *sorted(PACKAGE.glob("worker*.py")),
        *sorted(path for worker in PACKAGE.glob("worker*/") for path in worker.rglob("*.py")),
    ]:
        files[path] = never
    for path in sorted((PACKAGE / "lanes").rglob("*.py")):
        files[path] = (*never, WORKER)
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, imported module) for every import that runs when the module is imported:
    not inside a function, not under ``if TYPE_CHECKING:``."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.append((node.lineno, node.module))
            # `from lane_pg import postgres` imports the package lane_pg.postgres
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_the_layers_import_no_driver_at_module_level() -> None:
    files = _layer_files()
    worker = [path for path in files if "worker" in path.relative_to(PACKAGE).parts[0]]
    assert worker, "found no worker module: lane_pg/worker.py or lane_pg/worker/"
    violations = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for path, forbidden in files.items()
        for line, name in _module_level_imports(ast.parse(path.read_text(), str(path)))
        if _within(name, forbidden)
    ]
    assert violations == []


def test_the_static_check_sees_what_it_must() -> None:
    """The visitor finds module-level imports in blocks and classes, and skips function
    bodies and TYPE_CHECKING blocks (else the contract above could pass vacuously)."""
    source = (
        "import asyncpg\n"
        "from lane_pg import postgres\n"
        "try:\n    import redis\nexcept ImportError:\n    pass\n"
        "class C:\n    import psycopg\n"
        "if TYPE_CHECKING:\n    import sqlalchemy\nelse:\n    import psycopg_pool\n"
        "def f():\n    import sqlalchemy\n"
    )
    names = {name for _, name in _module_level_imports(ast.parse(source))}
    assert {"asyncpg", "lane_pg.postgres", "redis", "psycopg", "psycopg_pool"} <= names
    assert "sqlalchemy" not in names
