# Two commands matter: `make run` (the demo) and `make test` (the whole suite).
# Both bootstrap the same virtual environment in .venv, each installing only what it needs:
# `make run` tether's core (what `tether demo` imports: nothing optional), `make test` the
# test tools and every extra on top. Each has its own stamp, so `make run` after `make test`
# installs nothing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
EXTRAS := dev,docs,dataframe,postgres,redis,server,crypto,langgraph,openai-agents,adk,pydantic-ai,browser,recall,otel,mcp

.PHONY: help run test lint docs bench clean

help:
	@echo "make run    - run the tether demo on embedded SQLite (installs the core only)"
	@echo "make test   - lint, type-check and run the whole test suite (installs every extra)"
	@echo "make lint   - ruff and mypy only"
	@echo "make docs   - build the documentation site into site/ (mkdocs, strict)"
	@echo "make bench  - run the benchmarks and update the README figures"

$(PY):
	$(PYTHON) -m venv $(VENV)

# The core only: no pip upgrade either (the venv's pip installs an editable hatchling
# project), so a first `make run` is one resolver pass over six small dependencies.
$(RUN_STAMP): pyproject.toml | $(PY)
	@if [ -f $(TEST_STAMP) ] && [ $(TEST_STAMP) -nt pyproject.toml ]; then \
	  touch $@; \
	else \
	  $(PY) -m pip install -q -e . && touch $@; \
	fi

$(TEST_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@ $(RUN_STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/tether demo

lint: $(TEST_STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy

# Two workers (CI has 2 cores; much of the suite waits on subprocesses, servers and other
# projects' tests), fed two tests at a time so the longest (started first: LONGEST_FIRST
# in tests/conftest.py) overlap the rest. Every test keeps its own namespace, schema,
# key prefix, port and temporary directory, so the workers share the servers safely.
test: lint
	$(PY) -m pytest -q -n 2 --dist load --maxschedchunk 2

docs: $(TEST_STAMP)
	$(PY) -m mkdocs build --strict --site-dir site

bench: $(TEST_STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache
