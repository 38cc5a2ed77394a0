# The two set-up commands of the README. Each creates .venv itself:
# `make run` installs the runtime dependencies only, `make test` (and the
# other development targets) adds the development ones.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed-dev
# Blank counts as unset, from the environment or the command line alike
# (`PORT= make run` passed `--port` no value, and `--db ""` opened ".").
override PORT := $(if $(strip $(PORT)),$(PORT),8080)
override LIFECYCLE_PORT := $(if $(strip $(LIFECYCLE_PORT)),$(LIFECYCLE_PORT),8081)
override WAYPOST_DB := $(if $(strip $(WAYPOST_DB)),$(WAYPOST_DB),./waypost.db)

.PHONY: run test lint types unit browser schema bench constraints clean

$(BIN)/pip:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# constraints.txt pins every version (dependencies of dependencies too)
$(RUNTIME): pyproject.toml constraints.txt | $(BIN)/pip
	$(BIN)/pip install -q -c constraints.txt -e .
	touch $(RUNTIME)

$(STAMP): pyproject.toml constraints.txt | $(BIN)/pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $(RUNTIME) $(STAMP)

run: $(RUNTIME)
	$(BIN)/waypost serve --port $(PORT) --lifecycle-port $(LIFECYCLE_PORT) --db "$(WAYPOST_DB)"

test: lint types unit

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

types: $(STAMP)
	$(BIN)/mypy

# Four workers on the two cores of the machines CI runs on: most of a test's
# time is spent waiting (for a `serve` it started, a browser, a timer), so
# two workers kept the cores about half busy (`time make test`: 108% of one
# core, 758 s; four: 164%, 516 s, measured side by side on 2026-12-07).
# Every test makes its own files and ports, so they run apart (`pytest`
# alone runs on one). A file
# runs whole on one worker (`loadfile`), so that a module's shared server or
# browser starts once and the test that reads its log at the end sees every
# request. (`loadgroup` with an `xdist_group` mark did that for one module
# until pytest 9.2, whose node ids pytest-xdist 3.8 no longer tags: the
# module was split over both workers, and CI failed on its log count.)
unit: $(STAMP) browser
	$(BIN)/pytest -n 4 --dist loadfile

# The console's browser tests drive the OS's Chromium (found as
# tests/console_support.chromium_path finds it); install it when it is
# missing and we may (root with apt-get), else those tests skip and say why.
browser:
	@if [ -z "$$WAYPOST_CHROMIUM" ] && [ ! -x /usr/bin/chromium ] \
	    && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium for the console's browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	      || echo "could not install chromium: the browser tests will skip"; \
	  else echo "no chromium and no root apt-get: the browser tests will skip"; fi; \
	fi

# Rewrite the committed GraphQL schema snapshot after an intended change.
schema: $(STAMP)
	$(BIN)/python -c 'from waypost.schema import schema; print(str(schema))' > schema.graphql

bench: $(STAMP)
	$(BIN)/python -m bench

# The newest versions pyproject.toml admits, resolved in a scratch
# environment and written to constraints.txt (then run `make test`).
constraints:
	rm -rf .venv-constraints
	$(PYTHON) -m venv .venv-constraints
	.venv-constraints/bin/pip install -q --upgrade pip
	.venv-constraints/bin/pip install -q -e '.[dev,bench]'
	{ sed -n '/^#/p' constraints.txt; .venv-constraints/bin/pip freeze --exclude-editable; } > constraints.new
	mv constraints.new constraints.txt
	rm -rf .venv-constraints

clean:
	rm -rf $(VENV) .venv-constraints constraints.new .mypy_cache .pytest_cache .ruff_cache
