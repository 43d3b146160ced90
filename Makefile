# Two entry points for a fresh machine (Python 3.11+): `make main` and `make test`.
# Both create .venv on first use and install CAKE (its first-party plugins included) with its
# dev tools and Ray (the `ray` extra, so that `make test-slow` runs the Ray executor against a
# real local instance: an 80 MB wheel, 240 MB installed, seconds on a fast link).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TOOLS := tests/tools
TOOLS_STAMP := $(TOOLS)/node_modules/.installed
# pytest-xdist workers (`make test WORKERS=0` runs in one process); each file stays on one
# worker so that module fixtures (the nvcc builds of the examples) are built once.
WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile

.PHONY: main test test-slow lint bench clean

# The first-party plugins ship in the main distribution (setup.py): a .venv that still holds
# them as distributions of their own would load each plugin twice, so those are removed.
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip uninstall --quiet --yes cake-tactics cake-kmeans 2>/dev/null || true
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	touch $(STAMP)

## The main job on its embedded defaults: evolve the Flash-KMeans assignment kernel offline
## (tactic search guided by the cost model and the simulator; no API key, no GPU).
main: $(STAMP)
	$(BIN)/cake evolve kmeans_assign

# npm packages the tests run (tests/tools/package.json): the SARIF Multitool. Without npm
# the tests that need them are skipped, and say so.
$(TOOLS_STAMP): $(TOOLS)/package.json $(TOOLS)/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(TOOLS) --no-audit --no-fund --loglevel=error && touch $(TOOLS_STAMP); \
	else \
		echo "npm not found: tests that need $(TOOLS) (the SARIF Multitool) will be skipped"; \
	fi

## The checks and the test suite but for the tests marked slow (GPU tests skip without a
## GPU): under ten minutes on two cores.
test: $(STAMP) $(TOOLS_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(PYTEST) -m "not slow"

## The tests marked slow (every tactic variant emulated, long fuzzing, the nvcc sweeps):
## CI runs them after `make test`.
test-slow: $(STAMP) $(TOOLS_STAMP)
	$(PYTEST) -m slow

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python bench/check_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .import_linter_cache $(TOOLS)/node_modules
