# Two commands matter: `make run` (the demo) and `make test` (the whole suite).
# Both bootstrap their own virtual environment in .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help run test lint bench clean

help:
	@echo "make run    - run the tether demo on embedded SQLite"
	@echo "make test   - lint, type-check and run the whole test suite"
	@echo "make lint   - ruff and mypy only"
	@echo "make bench  - run the benchmarks and update the README figures"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,dataframe,postgres,redis,server,crypto,langgraph,openai-agents,adk,browser]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/tether demo

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy

test: lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
