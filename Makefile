# The two commands of the README:
#   make run   - set up the environment, then run the project's main job
#   make test  - set up the environment, then run lint, type checks and the whole test suite
# Set-up: a virtual environment in .venv (python3 -m venv) with dafka installed editable and
# its dev tools (pytest, hypothesis, mypy, ruff) from PyPI. Nothing is installed system-wide.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run run-fast test unit integration test-spark test-hosts lint bench c-reference clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/dafka pipeline

# The same job fed faster (RATE msg/s): its summary says whether the job kept up and the
# events/s it read while the producers ran, i.e. the rate this machine sustains.
RATE ?= 4000
run-fast: $(STAMP)
	$(VENV)/bin/dafka pipeline --rate $(RATE) --readings $$(( $(RATE) * 60 ))

lint: $(STAMP)
	$(PY) -m ruff check src tests bench scripts examples
	$(PY) -m ruff format --check src tests bench scripts examples
	$(PY) -m mypy

# The suite runs on 3 workers, one test file per worker at a time (--dist loadfile keeps a
# module's shared fixtures, such as its one Spark session, in one process): most integration
# tests wait on sockets and processes, so 3 workers on 2 cores halve the wall time.
TEST_WORKERS ?= 3

test: lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

unit: $(STAMP)
	$(PY) -m pytest -m unit

integration: $(STAMP)
	$(PY) -m pytest -m integration

test-spark: $(STAMP)
	$(PY) -m pytest -m spark

test-hosts: $(STAMP)
	$(PY) -m pytest -m hosts

bench: $(STAMP)
	for b in bench/*.py; do $(PY) $$b || exit 1; done

# The C reference's drivers for bench/c_reference.py --c-bin build/c-reference/bin (needs
# build-essential cmake git pkg-config libzmq3-dev libleveldb-dev; builds CZMQ with drafts)
c-reference:
	bench/c/build.sh

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
