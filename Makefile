# lane_pg developer tasks. `make test` is what CI runs (through .ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LANE_PG_TEST_DSN ?= postgresql://postgres@127.0.0.1:5432/test
export LANE_PG_TEST_REDIS ?= redis://127.0.0.1:6379/0
# pytest-xdist workers (each on a database of its own: tests/conftest.py); `make test
# PYTEST_WORKERS=0` runs the suite in this one process. Four workers that steal queued tests
# from each other: on the 2-core machine the suite spends part of its time waiting on
# PostgreSQL, Redis and the processes it starts (pytest alone, quiet machine: 3 workers
# 180 s, 4 stealing 169 s, 6 stealing 182 s).
PYTEST_WORKERS ?= 4
# Bytecode caches on even where the shell turns them off: without them every test process
# (each xdist worker, the fork server, each example and CLI subprocess) compiled every
# module again, and pytest rewrote the asserts of every test module (~6 s of CPU per
# worker). __pycache__ is ignored by git; `make clean` removes it.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv test lint typecheck imports pytest demo bench soak soak-storm contracts clean

# Re-installs only when the project metadata changed since the last install.
venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,redis,embedded]'
	touch $(STAMP)

lint: venv
	$(BIN)/ruff check .

typecheck: venv
	$(BIN)/mypy lane_pg

# The import contracts of pyproject.toml ([tool.importlinter]): layers point down.
imports: venv
	$(BIN)/lint-imports --no-cache

pytest: venv
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(if $(filter 0,$(PYTEST_WORKERS)),,--dist worksteal)

# mypy runs beside pytest: its ~10 s of CPU (a cold cache, as in CI) fit in the time the
# tests spend waiting on PostgreSQL and on the worker processes they start.
test: venv
	$(BIN)/ruff check .
	$(MAKE) --no-print-directory imports
	$(MAKE) --no-print-directory -j2 typecheck pytest

demo: venv
	$(BIN)/python examples/demo.py

bench: venv
	@if [ -f benchmarks/run.py ]; then $(BIN)/python benchmarks/run.py; \
	else echo "benchmarks/run.py not written yet"; fi

# A soak with random faults on servers of its own (not part of `make test`): every kind of
# job through $(SOAK_WORKERS) worker processes for $(MINUTES) minutes while workers are
# killed, stopped past their lease and cut off, the server restarts and a snapshot is held;
# then the checks and a one-screen report. `make soak BACKEND=redis MINUTES=30`.
MINUTES ?= 10
BACKEND ?= postgres
SOAK_WORKERS ?= 3
soak: venv
	$(BIN)/python -m soak --backend $(BACKEND) --minutes $(MINUTES) --workers $(SOAK_WORKERS)

# 20 workers on one PostgreSQL of its own (max_connections 100): a server restart and a
# fleet restart per round, with the connections received counted from the server's log.
soak-storm: venv
	$(BIN)/python -m soak.storm

# Regenerates the stored-function section of docs/CONTRACTS.md from a fresh install's
# catalog on the PostgreSQL of LANE_PG_TEST_DSN (tests/postgres/test_contracts_doc.py
# fails until it is re-run after a signature change).
contracts: venv
	$(BIN)/python -m tests.postgres.contracts_doc

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
