# Targets that CI (.ci/run) and people both call. `make setup` is idempotent.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PARTS := schema collector analytics dashboard bundle replay kernels demo cli

.PHONY: setup test fuzz lint imports format typecheck check run demo bench-store cluster-test clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch first and pinned to the CPU wheel, so nothing below can pull a multi-GB CUDA build. Then every
# extra (the slim base alone is `pip install .`: a serving host's install) and the development tools.
setup: $(BIN)/python
	$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -e '.[all,dev]'
	bash deploy/install-browser.sh
	bash deploy/install-validators.sh

# The README's two commands: `make run` (set up, then the main job) and `make check` (set up, then tests).
# One pytest process per part of the suite: a part that changes process-wide compiler state (a decomposition
# table, a cache salt, Dynamo settings) cannot leak it into another part's compiles. Parts run as many at a time
# as there are CPUs, longest first (TEST_JOBS=1 runs them one by one); tests/run_parts.py says how. Each part
# prints its 15 slowest test phases: where the suite's time goes, for whoever keeps it inside CI's limit.
test: setup
	$(BIN)/python tests/run_parts.py --durations=15

# The property-based tests with fresh random examples (the suite itself draws the same ones every run).
FUZZ_RUNS ?= 3
fuzz: setup
	@for i in $$(seq $(FUZZ_RUNS)); do \
		$(BIN)/python -m pytest -q --hypothesis-profile explore $$(grep -rl --include='test_*.py' '^from hypothesis' tests) || exit 1; \
	done

lint:
	$(BIN)/ruff check $(PARTS) tests benchmarks
	$(BIN)/ruff format --check $(PARTS) tests benchmarks

format:
	$(BIN)/ruff format $(PARTS) tests benchmarks
	$(BIN)/ruff check --fix $(PARTS) tests benchmarks

# The import rules of ARCHITECTURE.md ([tool.importlinter] in pyproject.toml); lazy imports count too.
imports:
	$(BIN)/lint-imports --no-cache

# mypy cannot follow setuptools' editable import hook, so it checks a link tree that spells the
# inferensics.* namespace out on disk.
typecheck:
	rm -rf build/typecheck && mkdir -p build/typecheck/inferensics
	for p in $(PARTS); do ln -s ../../../$$p build/typecheck/inferensics/$$p; done
	ln -s ../../tests build/typecheck/tests
	cd build/typecheck && MYPYPATH=. ../../$(BIN)/mypy --config-file ../../pyproject.toml inferensics tests

check: setup lint imports typecheck test

run: setup
	$(BIN)/inferensics demo

demo: setup
	$(BIN)/inferensics demo

# The live ClickHouse cluster (deploy/compose/cluster.yml) on loopback, tests/deploy/test_live_cluster.py against
# it, then removed. Needs Docker; nothing here has one, so CI does not run it.
cluster-test:
	bash deploy/compose/cluster-test.sh

bench-store:
	$(BIN)/python benchmarks/bench_store_insert.py

clean:
	rm -rf build .mypy_cache .ruff_cache
