# The two set-up commands of the README. Each creates .venv itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8080
WAYPOST_DB ?= ./waypost.db

.PHONY: run test lint types unit schema bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/waypost serve --port $(PORT) --db $(WAYPOST_DB)

test: lint types unit

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

types: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

# Rewrite the committed GraphQL schema snapshot after an intended change.
schema: $(STAMP)
	$(BIN)/python -c 'from waypost.schema import schema; print(str(schema))' > schema.graphql

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
